package guestapi

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Connection limits of the remote surface. Anyone who can route to the node
// reaches the guest API port, and each connection costs the agent (PID 1) a
// goroutine and TLS state. One source address may hold only PerIPConns at
// once; when all MaxConns are taken, a new connection evicts the oldest
// unauthenticated one, so a crowd of strangers cannot lock out the head's
// health poll or a caller with a token. A connection counts as
// authenticated once one of its requests carried a valid token; until then
// it must start a request within UnauthHeaderTimeout, and after its one
// unauthenticated request it is closed (no keep-alive), so strangers hold
// nothing idle.
const (
	MaxConns            = 256
	PerIPConns          = 16
	UnauthHeaderTimeout = 3 * time.Second
)

// Limits configures the remote surface's connection guard.
type Limits struct {
	Max, PerIP    int
	HeaderTimeout time.Duration // a new connection's time to start a request
	// Trusted is the head's address: its connections get PerIP of their own
	// beyond Max and are never evicted. Invalid = none.
	Trusted netip.Addr
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults(trusted netip.Addr) Limits {
	if l.Max <= 0 {
		l.Max = MaxConns
	}
	if l.PerIP <= 0 {
		l.PerIP = PerIPConns
	}
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = UnauthHeaderTimeout
	}
	if !l.Trusted.IsValid() {
		l.Trusted = trusted
	}
	return l
}

// guardListener admits connections under Limits. Its Accept never blocks on
// a full table (a blocked Accept is what let strangers starve the head):
// it refuses or evicts and accepts the next.
type guardListener struct {
	net.Listener
	lim Limits

	mu      sync.Mutex
	byIP    map[string]int
	conns   []*guardedConn // admitted, oldest first
	untrust int            // admitted connections not from Trusted
}

func newGuardListener(l net.Listener, lim Limits) *guardListener {
	return &guardListener{Listener: l, lim: lim, byIP: map[string]int{}}
}

func (l *guardListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if g := l.admit(c); g != nil {
			return g, nil
		}
	}
}

// admit registers c or closes it; an eviction's victim is closed outside
// the lock (its Close comes back to release).
func (l *guardListener) admit(c net.Conn) *guardedConn {
	key, trusted := l.source(c)
	l.mu.Lock()
	if l.byIP[key] >= l.lim.PerIP {
		l.mu.Unlock()
		c.Close()
		return nil
	}
	var victim *guardedConn
	if !trusted && l.untrust >= l.lim.Max {
		victim = l.oldestEvictable()
		if victim == nil { // every slot holds an authenticated caller
			l.mu.Unlock()
			c.Close()
			return nil
		}
		l.removeLocked(victim)
	}
	g := &guardedConn{Conn: c, l: l, key: key, trusted: trusted}
	l.byIP[key]++
	if !trusted {
		l.untrust++
	}
	l.conns = append(l.conns, g)
	// Set under the lock: the timer's callback and Close read it under it.
	g.deadline = time.AfterFunc(l.lim.HeaderTimeout, g.closeIfUnstarted)
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
	}
	return g
}

func (l *guardListener) source(c net.Conn) (key string, trusted bool) {
	s := c.RemoteAddr().String()
	if ap, err := netip.ParseAddrPort(s); err == nil {
		a := ap.Addr().Unmap()
		return a.String(), l.lim.Trusted.IsValid() && a == l.lim.Trusted.Unmap()
	}
	if host, _, err := net.SplitHostPort(s); err == nil { // vsock: "host(cid):port"
		return host, false
	}
	return s, false
}

func (l *guardListener) oldestEvictable() *guardedConn {
	for _, g := range l.conns {
		if !g.trusted && !g.authed() {
			return g
		}
	}
	return nil
}

// removeLocked forgets g once; later releases of it do nothing.
func (l *guardListener) removeLocked(g *guardedConn) {
	if g.gone {
		return
	}
	g.gone = true
	l.byIP[g.key]--
	if l.byIP[g.key] == 0 {
		delete(l.byIP, g.key)
	}
	if !g.trusted {
		l.untrust--
	}
	for i, x := range l.conns {
		if x == g {
			l.conns = append(l.conns[:i], l.conns[i+1:]...)
			break
		}
	}
}

// guardedConn is one admitted connection.
type guardedConn struct {
	net.Conn
	l       *guardListener
	key     string
	trusted bool

	// under l.mu
	deadline            *time.Timer
	gone, started, auth bool
}

func (g *guardedConn) Close() error {
	g.l.mu.Lock()
	t := g.deadline
	g.l.removeLocked(g)
	g.l.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	return g.Conn.Close()
}

func (g *guardedConn) authed() bool { return g.auth } // under l.mu

// markStarted: a request began (its headers arrived in time).
func (g *guardedConn) markStarted() {
	g.l.mu.Lock()
	g.started = true
	g.l.mu.Unlock()
}

// markAuthenticated: a request on it carried a valid token.
func (g *guardedConn) markAuthenticated() {
	g.l.mu.Lock()
	g.auth = true
	g.l.mu.Unlock()
}

func (g *guardedConn) closeIfUnstarted() {
	g.l.mu.Lock()
	idle := !g.started
	g.l.mu.Unlock()
	if idle {
		g.Close()
	}
}

// guardedOf finds our connection under the one net/http hands out (TLS
// wraps it).
func guardedOf(c net.Conn) *guardedConn {
	for {
		switch x := c.(type) {
		case *guardedConn:
			return x
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
}
