// Package acceptpace paces how fast a listener hands out new connections.
//
// Port A's answers are cheap but its TLS handshakes are not: when 1,000
// candidates enroll at once, 1,000 handshakes started within a fraction of
// a second fill the head's run queue, and port B's heartbeats wait behind
// them (tools/loadtest: the Go scheduler's p99 latency reached 400 ms in the
// first second of a storm while no port check had even started). Pacing
// Accept spreads that burst over a few seconds. Connections wait in the
// kernel's accept queue meanwhile; nothing is refused, and no connection,
// slow or stalled, holds anything of the pacer.
package acceptpace

import (
	"net"
	"sync"
	"time"
)

// Listener is a net.Listener whose Accept returns at most Rate connections
// per second on average, with bursts of up to Burst.
type Listener struct {
	net.Listener
	interval time.Duration // one token
	burst    int
	now      func() time.Time
	sleep    func(time.Duration)

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// New paces ln. now and sleep are injectable for tests (nil: the real
// clock).
func New(ln net.Listener, rate float64, burst int, now func() time.Time, sleep func(time.Duration)) *Listener {
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = time.Sleep
	}
	if burst < 1 {
		burst = 1
	}
	return &Listener{Listener: ln, interval: time.Duration(float64(time.Second) / rate), burst: burst,
		now: now, sleep: sleep, tokens: float64(burst), last: now()}
}

// Accept waits for a token, then accepts. Waiting before accepting (not
// after) leaves the connection in the kernel's queue, where it costs the
// head nothing; a closed listener still returns its error at once after
// the wait.
func (l *Listener) Accept() (net.Conn, error) {
	if d := l.take(); d > 0 {
		l.sleep(d)
	}
	return l.Listener.Accept()
}

// take spends one token and returns how long to wait for it to exist.
func (l *Listener) take() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.tokens = min(float64(l.burst), l.tokens+float64(now.Sub(l.last))/float64(l.interval))
	l.last = now
	l.tokens--
	if l.tokens >= 0 {
		return 0
	}
	return time.Duration(-l.tokens * float64(l.interval))
}
