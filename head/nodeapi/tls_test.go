package nodeapi

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestExpiryUsesInjectedClock: certificate validity is judged by the head's
// clock (Config.Now), so a node certificate past its NotAfter on that clock is
// forbidden although the wall clock still accepts it.
func TestExpiryUsesInjectedClock(t *testing.T) {
	p := newPortB(t)
	c1, _ := p.enroll(t, "i1", "127.0.3.1")
	p.clk.Add(2 * 365 * 24 * time.Hour)
	if st, body := p.post(t, "127.0.3.1", &c1, "/heartbeat", hb("i1")); st != 403 || body != `{"error":"forbidden"}` {
		t.Errorf("expired on the head's clock: %d %s, want 403 forbidden", st, body)
	}
}

// TestTLSFloor: port B speaks TLS 1.2 at least and asks every client for a
// certificate.
func TestTLSFloor(t *testing.T) {
	p := newPortB(t)
	host := p.url[len("https://"):]
	conn, err := tls.Dial("tcp", host, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11})
	if err == nil {
		conn.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
	asked := false
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err = tls.DialWithDialer(d, "tcp", host, &tls.Config{InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			asked = true
			return &tls.Certificate{}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if !asked {
		t.Error("port B did not ask for a client certificate")
	}
}

// TestHeartbeatRayState: ray.state is one of docs/protocol.md §7's three words; anything
// else (a node's text would reach `head status` on the operator's terminal)
// is 400 and not recorded.
func TestHeartbeatRayState(t *testing.T) {
	p := newPortB(t)
	c1, _ := p.enroll(t, "i1", "127.0.3.1")
	for _, state := range []string{"", "Running", "\x1b]0;pwned\x07", "running "} {
		h := hb("i1")
		h.Ray.State = state
		if st, body := p.post(t, "127.0.3.1", &c1, "/heartbeat", h); st != 400 {
			t.Errorf("ray.state %q: %d %s, want 400", state, st, body)
		}
	}
	if n, _ := p.reg.Node("i1"); n.LastHeartbeat != nil {
		t.Errorf("a bad heartbeat was recorded: %+v", n.Ray)
	}
	for _, state := range []string{wire.RayStarting, wire.RayRunning, wire.RayExited} {
		h := hb("i1")
		h.Ray.State = state
		if st, body := p.post(t, "127.0.3.1", &c1, "/heartbeat", h); st != 200 {
			t.Errorf("ray.state %q: %d %s, want 200", state, st, body)
		}
	}
}

// TestChainVerifiedOncePerConnection: heartbeats on one kept-alive
// connection verify the chain once; a certificate that expires while the
// connection stays open is refused from then on with the same 403.
func TestChainVerifiedOncePerConnection(t *testing.T) {
	p := newPortB(t)
	c1, _ := p.enroll(t, "i1", "127.0.3.1")
	client := fakeagent.Client("127.0.3.1", p.ca.Pool(), &c1)
	for i := range 5 {
		st, out, err := fakeagent.Post(context.Background(), client, p.url+"/heartbeat", hb("i1"))
		if err != nil || st != 200 {
			t.Fatalf("heartbeat %d: %d %s %v", i, st, out, err)
		}
	}
	p.srv.v.mu.Lock()
	n := p.srv.v.count
	p.srv.v.mu.Unlock()
	if n != 1 {
		t.Errorf("chain verified %d times for 5 heartbeats on one connection, want 1", n)
	}
	p.clk.Add(400 * 24 * time.Hour) // past the node certificate's lifetime
	st, out, err := fakeagent.Post(context.Background(), client, p.url+"/heartbeat", hb("i1"))
	if err != nil || st != 403 || string(out) != `{"error":"forbidden"}` {
		t.Errorf("expired during the connection: %d %s %v, want 403 forbidden", st, out, err)
	}
}
