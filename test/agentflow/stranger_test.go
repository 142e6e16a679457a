package agentflow

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestAgentStrangerKeepsNodeHealthy: an outside address that keeps 300
// connections open to the node's guest API (redialling each one the node
// closes) cannot make the node unhealthy: the head's health polls, from the
// head's address, keep succeeding, and another address is still served.
func TestAgentStrangerKeepsNodeHealthy(t *testing.T) {
	f := newFlow(t)
	f.start()
	f.waitRecord(90 * time.Second)
	n := f.head.waitNode(t, func(n wire.Node) bool { return n.Health == wire.HealthHealthy && n.GuestAPIPort > 0 })
	guest := net.JoinHostPort(f.vn.NodeIP, strconv.Itoa(n.GuestAPIPort))

	// Two more addresses on the host side of the veth: the node routes its
	// replies to them through its default route, the host.
	stranger, other := "10.251.0.7", "10.251.0.8"
	for _, ip := range []string{stranger, other} {
		run(t, "ip", "addr", "add", ip+"/32", "dev", f.vn.HostIf)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var dials, open atomic.Int64
	for range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(stranger)}, Timeout: 2 * time.Second}
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", guest)
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				dials.Add(1)
				open.Add(1)
				stop := context.AfterFunc(ctx, func() { c.Close() })
				io.Copy(io.Discard, c) // holds it, silent, until the node closes it
				stop()
				c.Close()
				open.Add(-1)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	before := f.head.waitNode(t, func(wire.Node) bool { return true })
	okBefore, failBefore := f.head.healthPolls(t)
	start := time.Now()
	after := f.head.waitNode(t, func(n wire.Node) bool { return n.Seq >= before.Seq+6 })
	t.Logf("stranger: %d dials in %v; node health %s, %d consecutive poll failures", dials.Load(), time.Since(start).Round(time.Millisecond), after.Health, after.HealthFailures)
	if after.Health != wire.HealthHealthy || after.HealthFailures != 0 {
		t.Errorf("under the stranger's connections the node is %s with %d failed polls, want healthy and 0", after.Health, after.HealthFailures)
	}
	okAfter, failAfter := f.head.healthPolls(t)
	t.Logf("health polls while the stranger ran: %d ok, %d failed", okAfter-okBefore, failAfter-failBefore)
	if okAfter-okBefore < 3 || failAfter != failBefore {
		t.Errorf("health polls while the stranger ran: %d ok, %d failed; want 3 or more ok and none failed", okAfter-okBefore, failAfter-failBefore)
	}
	// Another address is served at once (anonymous guest:health).
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(other)}}).DialContext,
		// Availability, not identity, is under test here.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	t0 := time.Now()
	resp, err := hc.Get(fmt.Sprintf("https://%s/prpc/v1/Health", guest))
	if err != nil {
		t.Fatalf("another address not served while the stranger holds connections: %v", err)
	}
	resp.Body.Close()
	t.Logf("another address served in %v", time.Since(t0).Round(time.Millisecond))
	if resp.StatusCode != 200 {
		t.Errorf("another address: Health %d, want 200", resp.StatusCode)
	}
}

// healthPolls reads the head's rayvast_health_polls_total counters.
func (h *head) healthPolls(t *testing.T) (ok, fail int) {
	t.Helper()
	text, err := h.admin.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(text, "\n") {
		var n int
		if _, err := fmt.Sscanf(l, `rayvast_health_polls_total{result="ok"} %d`, &n); err == nil {
			ok = n
		}
		if _, err := fmt.Sscanf(l, `rayvast_health_polls_total{result="fail"} %d`, &n); err == nil {
			fail = n
		}
	}
	return ok, fail
}
