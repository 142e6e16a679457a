package guestapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

func writeJSONFile(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// standalone runs `agent guest-api` in-process until the test ends and
// returns a client for its listen address.
func standalone(t *testing.T, app wire.AppFile, sys wire.SysConfig, extra ...string) (*running, *rvtest.Buffer) {
	t.Helper()
	dir := t.TempDir()
	appPath, sysPath := writeJSONFile(t, dir, "app.json", app), writeJSONFile(t, dir, "sys.json", sys)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &rvtest.Buffer{}
	done := make(chan int, 1)
	args := append([]string{"--app", appPath, "--sys-config", sysPath, "--listen", "127.0.0.1:0"}, extra...)
	go func() { done <- RunStandalone(ctx, args, &bytes.Buffer{}, stderr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
	re := regexp.MustCompile(`guest api listening"? addr=(\S+) tls=(\w+)`)
	var r *running
	rvtest.WaitFor(t, 10*time.Second, func() error {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			r = &running{addr: m[1], tls: m[2] == "true", logs: stderr}
			return nil
		}
		select {
		case code := <-done:
			done <- code // for the clean-up's wait
			t.Fatalf("exited %d: %s", code, stderr.String())
		default:
		}
		return fmt.Errorf("not listening: %s", stderr.String())
	})
	return r, stderr
}

func testAppFile() wire.AppFile {
	a := wire.NewAppFile()
	a.AppID, a.AppRootKey = testApp, base64.StdEncoding.EncodeToString(testRoot)
	return a
}

// TestStandalone: `agent guest-api` serves plain HTTP without identity,
// opens only what the sys-config grants, and serves its own log at
// /logs/agent when the app sets public_logs.
func TestStandalone(t *testing.T) {
	app := testAppFile()
	app.PublicLogs = true
	r, stderr := standalone(t, app, wire.SysConfig{GuestAgentAPI: &wire.GuestAPIPolicy{
		AnonymousScopes: []string{"guest:version", "guest:health"},
		ExternalIssuers: baseConfig(t, &rvtest.Buffer{}).Policy.ExternalIssuers}})
	if r.tls {
		t.Fatal("TLS without identity")
	}
	if code, _, _ := r.raw(t, "GET", "/prpc/v1/Health", ""); code != 200 {
		t.Errorf("anonymous health: %d", code)
	}
	if code, _, _ := r.raw(t, "GET", "/logs/agent", ""); code != 401 {
		t.Errorf("anonymous logs: %d", code)
	}
	tok := tokenAt(t, time.Now(), "guest:logs")
	code, _, body := r.raw(t, "GET", "/logs/agent", tok)
	if code != 200 || !strings.Contains(body, "guest api listening") {
		t.Errorf("logs with token: %d %q", code, body)
	}
	assertNoSecrets(t, stderr.String(), tok)
}

// TestStandaloneIdentity: with node_cert/node_key in the app file the TCP
// surface is HTTPS with the node cert, and attestation works.
func TestStandaloneIdentity(t *testing.T) {
	p := getPKI(t)
	dir := t.TempDir()
	// node_cert holds the node cert followed by the CA: the chain.
	if err := os.WriteFile(filepath.Join(dir, "node.pem"), append(append([]byte{}, p.Node.CertPEM...), p.CA.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node.key"), p.Node.KeyPEM.Reveal(), 0o600); err != nil {
		t.Fatal(err)
	}
	app := testAppFile()
	app.NodeCert, app.NodeKey = filepath.Join(dir, "node.pem"), filepath.Join(dir, "node.key")
	r, _ := standalone(t, app, wire.SysConfig{GuestAgentAPI: &wire.GuestAPIPolicy{AnonymousScopes: []string{"guest:attest-app-key"}}})
	if !r.tls {
		t.Fatal("no TLS with identity")
	}
	code, _, body := r.raw(t, "GET", "/prpc/GetAttestationForAppKey", "")
	var a wire.AppKeyAttestation
	if err := json.Unmarshal([]byte(body), &a); err != nil || code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if err := verifyAttestation(a, p.CA.Pool()); err != nil {
		t.Error(err)
	}
}

// TestStandaloneRefuses: bad flags and bad config exit 2 naming the problem;
// --help answers on stdout.
func TestStandaloneRefuses(t *testing.T) {
	dir := t.TempDir()
	app := writeJSONFile(t, dir, "app.json", testAppFile())
	okSys := writeJSONFile(t, dir, "sys.json", wire.SysConfig{})
	short := testAppFile()
	short.AppRootKey = base64.StdEncoding.EncodeToString(testRoot[:8])
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"help", []string{"--help"}, 0, "usage: agent guest-api --app FILE --sys-config FILE --listen ADDR [--socket PATH]"},
		{"no flags", nil, 2, "required"},
		{"unknown flag", []string{"--nope"}, 2, "-nope"},
		{"unknown scope", []string{"--app", app, "--listen", "127.0.0.1:0", "--sys-config",
			writeJSONFile(t, dir, "s1.json", map[string]any{"guest_agent_api": map[string]any{"anonymous_scopes": []string{"guest:dashbaord"}}})}, 2, "guest:dashbaord"},
		{"bad key", []string{"--app", app, "--listen", "127.0.0.1:0", "--sys-config",
			writeJSONFile(t, dir, "s2.json", map[string]any{"guest_agent_api": map[string]any{"external_issuers": []any{map[string]any{"name": "ops", "public_keys": []string{"xyz"}}}}})}, 2, `issuer "ops": public_keys[0]`},
		{"unknown field", []string{"--app", app, "--listen", "127.0.0.1:0", "--sys-config",
			writeJSONFile(t, dir, "s3.json", map[string]any{"guest_agent_api": map[string]any{"anonymous": []string{}}})}, 2, "unknown field"},
		{"short root key", []string{"--app", writeJSONFile(t, dir, "a2.json", short), "--sys-config", okSys, "--listen", "127.0.0.1:0"}, 2, "app_root_key"},
		{"missing app", []string{"--app", filepath.Join(dir, "none"), "--sys-config", okSys, "--listen", "127.0.0.1:0"}, 2, "none"},
		{"bad listen", []string{"--app", app, "--sys-config", okSys, "--listen", "vsock://x:1"}, 1, ""},
	} {
		var out, errb bytes.Buffer
		code := RunStandalone(context.Background(), c.args, &out, &errb)
		if code != c.code || !strings.Contains(out.String()+errb.String(), c.says) {
			t.Errorf("%s: exit %d, want %d; output %q should say %q", c.name, code, c.code, out.String()+errb.String(), c.says)
		}
		if strings.Contains(errb.String(), base64.StdEncoding.EncodeToString(testRoot)) {
			t.Errorf("%s: root key printed", c.name)
		}
	}
}
