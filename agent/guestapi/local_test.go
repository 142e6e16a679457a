package guestapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestAttestation: the answer verifies against the cluster CA alone and
// names the instance and the app key Info reports; any edit breaks it; a
// different CA refuses it; without identity the method is 503.
func TestAttestation(t *testing.T) {
	r := start(t, nil)
	code, _, body := r.raw(t, "POST", "/prpc/Worker.GetAttestationForAppKey", token(t, "guest:attest-app-key"))
	var a wire.AppKeyAttestation
	if err := json.Unmarshal([]byte(body), &a); err != nil || code != 200 {
		t.Fatalf("attestation: %d %s", code, body)
	}
	if err := verifyAttestation(a, getPKI(t).CA.Pool()); err != nil {
		t.Fatalf("good attestation refused: %v", err)
	}
	if a.InstanceID != "inst-7" || a.AppPublicKey != r.srv.AppPublicKey() || a.AppID != testApp {
		t.Errorf("attestation names %+v", a)
	}
	seed, _ := guestauth.DeriveSeed(testRoot, guestauth.AppKeyInfo)
	if want := hex.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)); a.AppPublicKey != want {
		t.Errorf("app key %s, want the HKDF app-key:v1 key %s", a.AppPublicKey, want)
	}
	other := a
	other.AppPublicKey = strings.Repeat("00", 32)
	other.Message = AttestationMessage(a.AppID, a.InstanceID, other.AppPublicKey)
	renamed := a
	renamed.InstanceID = "inst-8"
	for name, bad := range map[string]wire.AppKeyAttestation{"other key": other, "other instance": renamed} {
		if err := verifyAttestation(bad, getPKI(t).CA.Pool()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	otherCA, _, _ := pki.NewCA(nil, "other", time.Now())
	if err := verifyAttestation(a, otherCA.Pool()); err == nil {
		t.Error("accepted against another CA (the chain's own CA copy must not be trusted)")
	}
	plain := start(t, func(c *Config) { c.NodeCertPEM, c.NodeKeyPEM, c.CACertPEM = nil, nilKey(), nil })
	if code, _, _ := plain.raw(t, "GET", "/prpc/GetAttestationForAppKey", token(t, "guest:attest-app-key")); code != 503 {
		t.Errorf("without identity: %d, want 503", code)
	}
	if code, _, _ := plain.raw(t, "GET", "/prpc/GetAttestationForAppKey", ""); code != 401 {
		t.Errorf("without identity, anonymous: %d, want 401", code)
	}
}

// TestUnixSocket: the local surface is 0600, needs no token, answers GetKey
// with the HKDF of the path, and GetKey is absent on the remote surface.
func TestUnixSocket(t *testing.T) {
	r := start(t, nil)
	sock := filepath.Join(t.TempDir(), "agent.sock")
	go r.srv.ServeUnix(sock)
	c := unixClient(sock)
	rvtest.WaitFor(t, 5*time.Second, func() error {
		if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
			return fmt.Errorf("socket %s: %v, %v, want mode 0600", sock, fi, err)
		}
		return nil
	})
	resp, err := c.Post("http://agent/prpc/GetKey", "application/json", strings.NewReader(`{"path":"my/app/key","algorithm":"ed25519"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got wire.GetKeyReply
	if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GetKey: %d %s", resp.StatusCode, b)
	}
	seed, _ := guestauth.DeriveSeed(testRoot, "my/app/key")
	if got.Key != hex.EncodeToString(seed) || got.PublicKey != hex.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)) {
		t.Errorf("GetKey = %+v", got)
	}
	// The issuer key is an ordinary key: a local process can mint with it
	// (the seed's "one trust domain"), and the server accepts the result.
	issuer, _ := postJSON(t, c, "/prpc/GetKey", `{"path":"rayvast:guest-api:issuer:v1","algorithm":"ed25519"}`)
	s, _ := hex.DecodeString(issuer["key"])
	tok, _ := guestauth.Mint(ed25519.NewKeyFromSeed(s), guestauth.MintRequest{Iss: guestauth.InternalIssuer(testApp),
		Aud: []string{testApp}, Scopes: []string{"guest:version"}, TTL: time.Minute, Now: testNow})
	if code, _, _ := r.raw(t, "GET", "/prpc/v1/Version", tok); code != 200 {
		t.Errorf("token minted with the GetKey issuer key: %d", code)
	}
	for body, want := range map[string]int{
		`{"path":"x","algorithm":"secp256k1"}`: 400, `{"path":"","algorithm":"ed25519"}`: 400,
		`{"path":"x","algorithm":"ed25519","extra":1}`: 400, `nope`: 400,
	} {
		if _, code := postJSON(t, c, "/prpc/GetKey", body); code != want {
			t.Errorf("GetKey %s: %d, want %d", body, code, want)
		}
	}
	for path, want := range map[string]int{"/prpc/Info": 200, "/prpc/v1/Health": 200, "/prpc/v0/Worker.GetKey": 405, "/nope": 401} {
		resp, err := c.Get("http://agent" + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("local GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	all := token(t, scopeNames(guestauth.AllScopes)...)
	if code, _, _ := r.raw(t, "POST", "/prpc/GetKey", all); code != 401 {
		t.Errorf("GetKey over TCP with every scope: %d, want 401", code)
	}
	assertNoSecrets(t, r.logs.String(), got.Key, issuer["key"], tok, all)
}

func unixClient(sock string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
}

func postJSON(t *testing.T, c *http.Client, path, body string) (map[string]string, int) {
	t.Helper()
	resp, err := c.Post("http://agent"+path, "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return m, resp.StatusCode
}
