package guestapi

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// TestServeTCPBoundsConnections proves a stranger opening many idle
// connections to the guest API port cannot make the agent (PID 1: its death
// ends the container) hold a goroutine and TLS state for each: at most
// MaxConns are being served at once, the rest wait in the kernel's backlog.
func TestServeTCPBoundsConnections(t *testing.T) {
	r := start(t, nil)
	settle := func() int { // goroutines, once the accept loop has caught up
		n := runtime.NumGoroutine()
		for i := 0; i < 40; i++ {
			time.Sleep(25 * time.Millisecond)
			m := runtime.NumGoroutine()
			if m == n {
				return m
			}
			n = m
		}
		return n
	}
	before := settle()
	const opened = MaxConns + 100
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < opened; i++ {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	grown := settle() - before
	t.Logf("%d idle connections: %d more goroutines (MaxConns %d)", opened, grown, MaxConns)
	if grown > MaxConns+10 {
		t.Errorf("%d idle connections made %d goroutines, want at most about MaxConns=%d", opened, grown, MaxConns)
	}
	// Closed connections give their slots back: a caller is served again.
	for _, c := range conns {
		c.Close()
	}
	if code, _, _ := r.raw(t, "GET", "/prpc/v1/Version", token(t, "guest:version")); code != 200 {
		t.Errorf("after the idle connections closed: Version answered %d, want 200", code)
	}
}
