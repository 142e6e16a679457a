package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/guestapi"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

func tool(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb, time.Now, rand.Reader)
	return strings.TrimSpace(out.String()), errb.String(), code
}

// TestOperatorHowTo is docs/operations.md's how-to, end to end: make an issuer key,
// name it in the host's sys-config, grant a colleague guest:logs for an
// hour; the standalone agent serves /logs/agent to the colleague, and a
// stranger gets 401 on every route the config does not open.
func TestOperatorHowTo(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "ops.key")
	pub, _, code := tool(t, "keygen", "--key", keyFile)
	if code != 0 || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(pub) {
		t.Fatalf("keygen: %d %q", code, pub)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi, err)
	}
	if again, _, _ := tool(t, "pubkey", "--key", keyFile); again != pub {
		t.Errorf("pubkey %q != keygen's %q", again, pub)
	}
	if _, _, code := tool(t, "keygen", "--key", keyFile); code == 0 {
		t.Error("keygen overwrote an existing key")
	}

	app := wire.NewAppFile()
	app.AppID, app.PublicLogs = "app-42", true
	app.AppRootKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32))
	sys := map[string]any{"guest_agent_api": map[string]any{
		"anonymous_scopes": []string{"guest:health"},
		"external_issuers": []any{map[string]any{"name": "ops", "public_keys": []string{pub}}}}}
	addr := runAgent(t, dir, app, sys)

	tok, stderr, code := tool(t, "mint", "--key", keyFile, "--iss", "ops", "--aud", "app-42", "--scope", "guest:logs", "--ttl", "1h")
	if code != 0 {
		t.Fatalf("mint: %d %s", code, stderr)
	}
	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/logs/agent", tok); code != 200 || !strings.Contains(body, "guest api listening") {
		t.Errorf("colleague /logs/agent: %d %q", code, body)
	}
	if code, _ := get("/prpc/Info", tok); code != 401 {
		t.Errorf("colleague /prpc/Info: %d, want 401 (only guest:logs granted)", code)
	}
	for _, p := range []string{"/", "/logs/agent", "/logs/ray", "/metrics", "/prpc/Version", "/prpc/v1/Version",
		"/prpc/Info", "/prpc/v1/Info", "/prpc/GetAttestationForAppKey", "/prpc/GetKey", "/nope", "/%70rpc/Info"} {
		if code, _ := get(p, ""); code != 401 {
			t.Errorf("stranger %s: %d, want 401", p, code)
		}
	}
	if code, _ := get("/prpc/v1/Health", ""); code != 200 {
		t.Errorf("stranger /prpc/v1/Health (opened by the config): %d", code)
	}
}

// runAgent runs `agent guest-api` in-process on 127.0.0.1:0 and returns its address.
func runAgent(t *testing.T, dir string, app wire.AppFile, sys any) string {
	t.Helper()
	write := func(name string, v any) string {
		b, _ := json.Marshal(v)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	args := []string{"--app", write("app.json", app), "--sys-config", write("sys.json", sys), "--listen", "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &rvtest.Buffer{}
	done := make(chan int, 1)
	go func() { done <- guestapi.RunStandalone(ctx, args, io.Discard, logs) }()
	t.Cleanup(func() { cancel(); <-done })
	re := regexp.MustCompile(`guest api listening"? addr=(\S+)`)
	var addr string
	rvtest.WaitFor(t, 10*time.Second, func() error {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
			return nil
		}
		return fmt.Errorf("agent not listening: %s", logs.String())
	})
	return addr
}

// TestMintRefuses: over an hour, unknown scopes, missing flags, a wrong key
// file all refuse; --help answers.
func TestMintRefuses(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	if _, _, code := tool(t, "keygen", "--key", key); code != 0 {
		t.Fatal("keygen failed")
	}
	notKey := filepath.Join(dir, "nk")
	if err := os.WriteFile(notKey, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"mint", "--key", key, "--iss", "ops", "--aud", "app"}
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"ttl 2h", append(base, "--scope", "guest:logs", "--ttl", "2h"), "over the 1h maximum"},
		{"ttl 61m", append(base, "--scope", "guest:logs", "--ttl", "61m"), "over the 1h maximum"},
		{"unknown scope", append(base, "--scope", "guest:logs guest:root"), `unknown scope "guest:root"`},
		{"no scope", base, "no scope"},
		{"no aud", []string{"mint", "--key", key, "--iss", "ops", "--scope", "guest:logs"}, "--aud"},
		{"no iss", []string{"mint", "--key", key, "--aud", "a", "--scope", "guest:logs"}, "empty iss"},
		{"not a key", []string{"mint", "--key", notKey, "--iss", "o", "--aud", "a", "--scope", "guest:logs"}, "PRIVATE KEY"},
		{"unknown command", []string{"burn", "--key", key}, "unknown command"},
	} {
		_, stderr, code := tool(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.says) {
			t.Errorf("%s: exit %d, stderr %q, want it to say %q", c.name, code, stderr, c.says)
		}
	}
	for _, h := range [][]string{{"--help"}, {"help"}, {"mint", "--help"}} {
		out, _, code := tool(t, h...)
		if code != 0 || !strings.Contains(out, "guesttoken mint") || !strings.Contains(out, "guest:logs") {
			t.Errorf("%v: %d %q", h, code, out)
		}
	}
	tok, _, code := tool(t, append(base, "--scope", "guest:logs,guest:info", "--ttl", "30m")...)
	if code != 0 || strings.Count(tok, ".") != 2 {
		t.Errorf("comma scopes: %d %q", code, tok)
	}
}
