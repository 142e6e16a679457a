package healthpoll

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/guestapi"
	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

var root = bytes.Repeat([]byte{5}, 32)

// node starts a real guest API with a node cert for 127.0.0.1 from a fresh
// CA and returns the CA and the port.
func node(t *testing.T, policy wire.GuestAPIPolicy) (*pki.CA, int) {
	t.Helper()
	p := rvtest.NewNodePKI(t, "i-1")
	srv, err := guestapi.New(guestapi.Config{AppID: "app", AppRootKey: secret.NewBytes(root), Policy: policy,
		NodeCertPEM: p.Node.CertPEM, NodeKeyPEM: p.Node.KeyPEM, CACertPEM: p.CA.CertPEM})
	if err != nil {
		t.Fatal(err)
	}
	return p.CA, rvtest.ServeLoopback(t, srv).Port
}

// TestCheck: the node's own health token passes over HTTPS verified against
// the CA; no token, a stale token, another app's token, another CA and a
// closed port all fail, and no error quotes the token.
func TestCheck(t *testing.T) {
	ca, port := node(t, wire.GuestAPIPolicy{})
	good, err := guestauth.MintHealthToken("app", root, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := guestauth.MintHealthToken("app", root, time.Now().Add(-2*time.Hour))
	otherApp, _ := guestauth.MintHealthToken("other", root, time.Now())
	p := New(Config{CA: ca.Pool()})
	ctx := context.Background()
	if err := p.Check(ctx, "127.0.0.1", port, good); err != nil {
		t.Fatalf("good token: %v", err)
	}
	for name, tok := range map[string]string{"none": "", "stale": stale, "other app": otherApp, "garbage": "x.y.z"} {
		err := p.Check(ctx, "127.0.0.1", port, tok)
		if err == nil || !strings.Contains(err.Error(), "status 401") {
			t.Errorf("%s: got %v, want a 401 failure", name, err)
		}
		if tok != "" && err != nil && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: error quotes the token", name)
		}
	}
	other, _, _ := pki.NewCA(nil, "other", time.Now())
	if err := New(Config{CA: other.Pool()}).Check(ctx, "127.0.0.1", port, good); err == nil {
		t.Error("node cert accepted against another CA")
	}
	if err := New(Config{}).Check(ctx, "127.0.0.1", port, good); err == nil {
		t.Error("checked without a CA")
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := p.Check(ctx, "127.0.0.1", closed, good); err == nil {
		t.Error("closed port healthy")
	}
}

// TestCheckTimeout: a node that accepts but never answers fails within the
// poller's timeout instead of hanging the head.
func TestCheckTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 8)
	defer func() {
		l.Close()
		for {
			select {
			case c := <-conns:
				c.Close()
			default:
				return
			}
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c // held open, never answered
		}
	}()
	ca, _, _ := pki.NewCA(nil, "t", time.Now())
	err = New(Config{CA: ca.Pool(), Timeout: 200 * time.Millisecond}).Check(context.Background(), "127.0.0.1", l.Addr().(*net.TCPAddr).Port, "t")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a deadline error", err)
	}
}
