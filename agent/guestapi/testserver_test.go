package guestapi

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

const testApp = "app-1"

var (
	testRoot = bytes.Repeat([]byte{0x42}, 32)
	testNow  = time.Date(2026, 11, 30, 12, 10, 0, 0, time.UTC)
	opsKey   = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))
)

var (
	pkiOnce sync.Once
	pkiVal  rvtest.NodePKI
)

// getPKI is the package's one cluster CA and node cert for 127.0.0.1, made
// once (every server started here is the same node, inst-7).
func getPKI(t *testing.T) rvtest.NodePKI {
	t.Helper()
	pkiOnce.Do(func() { pkiVal = rvtest.NewNodePKI(t, "inst-7") })
	if pkiVal.CA == nil {
		t.Fatal("the test PKI failed in an earlier test")
	}
	return pkiVal
}

// baseConfig is a server with identity, the ops issuer and no anonymous scope.
func baseConfig(t *testing.T, logs *rvtest.Buffer) Config {
	p := getPKI(t)
	return Config{
		AppID: testApp, AppRootKey: secret.NewBytes(testRoot),
		Policy: wire.GuestAPIPolicy{ExternalIssuers: []wire.Issuer{{Name: "ops",
			PublicKeys: []string{hex.EncodeToString(opsKey.Public().(ed25519.PublicKey))}}}},
		NodeCertPEM: p.Node.CertPEM, NodeKeyPEM: p.Node.KeyPEM, CACertPEM: p.CA.CertPEM,
		Now: func() time.Time { return testNow },
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// running is a server serving its remote surface on 127.0.0.1.
type running struct {
	srv    *Server
	addr   string
	tls    bool
	client *http.Client
	logs   *rvtest.Buffer
}

func start(t *testing.T, mut func(*Config)) *running {
	t.Helper()
	logs := &rvtest.Buffer{}
	cfg := baseConfig(t, logs)
	if mut != nil {
		mut(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &running{srv: srv, addr: rvtest.ServeLoopback(t, srv).String(), tls: srv.HasIdentity(), logs: logs}
	r.client = &http.Client{Transport: &http.Transport{TLSClientConfig: r.tlsConfig()}, Timeout: 10 * time.Second}
	return r
}

func (r *running) tlsConfig() *tls.Config { return pkiVal.ClientTLS() }

// raw sends one request with exactly the request-target given (no client
// normalisation) and returns status, headers and body.
func (r *running) raw(t *testing.T, method, target, token string) (int, http.Header, string) {
	t.Helper()
	var c net.Conn
	var err error
	if r.tls {
		c, err = tls.Dial("tcp", r.addr, r.tlsConfig())
	} else {
		c, err = net.Dial("tcp", r.addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: node\r\nConnection: close\r\n", method, target)
	if token != "" {
		fmt.Fprintf(&req, "Authorization: Bearer %s\r\n", token)
	}
	req.WriteString("Content-Length: 0\r\n\r\n")
	if _, err := io.WriteString(c, req.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// token mints an ops token for the scopes (names), valid at testNow.
func token(t *testing.T, scopes ...string) string {
	t.Helper()
	return tokenAt(t, testNow, scopes...)
}

// tokenAt mints an ops token for the scopes, valid at now.
func tokenAt(t *testing.T, now time.Time, scopes ...string) string {
	t.Helper()
	tok, err := guestauth.Mint(opsKey, guestauth.MintRequest{Iss: "ops", Aud: []string{testApp}, Scopes: scopes, TTL: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// assertNoSecrets fails if a log holds a token or the app root key.
func assertNoSecrets(t *testing.T, log string, secrets ...string) {
	t.Helper()
	all := append([]string{hex.EncodeToString(testRoot), base64.StdEncoding.EncodeToString(testRoot)}, secrets...)
	for _, s := range all {
		if s != "" && strings.Contains(log, s) {
			t.Errorf("log contains a secret (%d bytes)", len(s))
		}
	}
}

func nilKey() secret.Bytes { return secret.Bytes{} }
