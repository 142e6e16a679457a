// Package checkgate admits the head's port checks (docs/protocol.md §6 step 7) a few at
// a time, as many as the head can run without making its other work wait.
//
// A fixed bound cannot be right both ways. On the real Internet a check is
// mostly waiting (64 connections over 50–300 ms round trips), so hundreds
// must run at once or a storm of 2,000 candidates outlasts the agents' 60 s
// enroll timeout. On a saturated machine (loopback here: the check's 64
// connections are kernel work on the head's own cores) hundreds at once
// share the CPU so thinly that each check's 2 s reply timeouts pass and good
// candidates are rejected, and heartbeats wait behind them: measured with
// tools/loadtest, p99 900 ms during a storm against 38 ms for a bare server
// under the same storm.
//
// So the limit adapts, additive-increase multiplicative-decrease, to the one
// signal that says the head is falling behind: how long runnable goroutines
// wait for a CPU (the Go scheduler's own latency histogram). While that
// stays under the target and checks are queued, the limit grows; when it
// passes the target, the limit shrinks. Waiting candidates are admitted in
// arrival order, and a check's own timeouts start only when it is admitted.
package checkgate

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/ctxsleep"
)

// Defaults for the zero values of Config, chosen with tools/loadtest --pin
// (the head alone on a core, 1,000 heartbeating nodes, 1,000 enrolling):
// min 4 / 5 ms kept heartbeats' p99 at 45–76 ms, at or under the bare
// server's under the same storm; 8 / 10 ms gave 75–86 ms, 16 / 20 ms
// 134–195 ms, with storms no faster. Where checks mostly wait (the real
// Internet) the scheduler stays calm and the limit climbs to Max within
// about 2 s (+1/8 per 50 ms tick).
const (
	DefaultMin    = 4
	DefaultMax    = 512
	DefaultTarget = 5 * time.Millisecond
	// DefaultInterval is how often Run samples the scheduler.
	DefaultInterval = 50 * time.Millisecond
)

// Config tunes a Gate. Zero values take the defaults.
type Config struct {
	Min, Max int           // bounds of the limit; Max also bounds descriptors (16 per check)
	Target   time.Duration // the scheduling latency (p99 of an interval) the gate keeps under
	// Pressure returns the p99 scheduling latency since its last call, and
	// false when nothing was scheduled. Default: SchedLatency().
	Pressure func() (time.Duration, bool)
}

// Gate is safe for concurrent use.
type Gate struct {
	cfg Config

	mu       sync.Mutex
	limit    float64
	inFlight int
	waiting  []chan struct{} // FIFO; closed when admitted
}

// New returns a gate starting at its minimum limit.
func New(cfg Config) *Gate {
	if cfg.Min <= 0 {
		cfg.Min = DefaultMin
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultMax
	}
	cfg.Max = max(cfg.Max, cfg.Min)
	if cfg.Target <= 0 {
		cfg.Target = DefaultTarget
	}
	if cfg.Pressure == nil {
		cfg.Pressure = SchedLatency()
	}
	return &Gate{cfg: cfg, limit: float64(cfg.Min)}
}

// Acquire waits for a turn, in arrival order, and returns the function
// that gives it back. It fails only when ctx ends first.
func (g *Gate) Acquire(ctx context.Context) (release func(), err error) {
	g.mu.Lock()
	if len(g.waiting) == 0 && g.inFlight < g.limitLocked() {
		g.inFlight++
		g.mu.Unlock()
		return g.releaseOnce(), nil
	}
	ch := make(chan struct{})
	g.waiting = append(g.waiting, ch)
	g.mu.Unlock()
	select {
	case <-ch:
		return g.releaseOnce(), nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		for i, w := range g.waiting {
			if w == ch {
				g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
				return nil, context.Cause(ctx)
			}
		}
		// Admitted just as ctx ended: the turn is ours, hand it on.
		g.inFlight--
		g.admitLocked()
		return nil, context.Cause(ctx)
	}
}

func (g *Gate) releaseOnce() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.inFlight--
			g.admitLocked()
		})
	}
}

// admitLocked lets waiters in while there is room. Caller holds mu.
func (g *Gate) admitLocked() {
	for len(g.waiting) > 0 && g.inFlight < g.limitLocked() {
		close(g.waiting[0])
		g.waiting = g.waiting[1:]
		g.inFlight++
	}
}

func (g *Gate) limitLocked() int { return int(math.Floor(g.limit)) }

// Tick samples the pressure once and moves the limit: down by a quarter
// when the scheduling latency passed the target, up by an eighth (at least
// one) when it did not and checks are waiting. An idle gate keeps its limit.
func (g *Gate) Tick() {
	p, ok := g.cfg.Pressure()
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case ok && p > g.cfg.Target:
		g.limit = max(float64(g.cfg.Min), g.limit*0.75)
	case len(g.waiting) > 0:
		g.limit = min(float64(g.cfg.Max), g.limit+max(1, g.limit/8))
		g.admitLocked()
	}
}

// Run calls Tick every interval until ctx ends.
func (g *Gate) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	ctxsleep.Every(ctx, interval, g.Tick)
}

// Stats is a snapshot for /metrics and the log.
type Stats struct {
	Limit, InFlight, Waiting int
}

// Stats returns the gate's current limit, checks running and checks queued.
func (g *Gate) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Limit: g.limitLocked(), InFlight: g.inFlight, Waiting: len(g.waiting)}
}
