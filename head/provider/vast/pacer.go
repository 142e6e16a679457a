package vast

import (
	"context"
	"sync"
	"time"
)

// Endpoints the pacer keeps apart (vast limits each one per caller).
const (
	EpSearch  = "search"
	EpCreate  = "create"
	EpShow    = "show"
	EpList    = "list"
	EpDestroy = "destroy"
)

// Limits are vast's minimum intervals between two requests to one endpoint,
// and the extra wait after a 429 (SOURCES.md: x-rate-limit of the API
// reference's create_instance, show_instance, show_instances,
// destroy_instance and search_offers pages).
type Limits struct {
	Interval map[string]time.Duration
	Penalty  map[string]time.Duration // added to the backoff after a 429
}

// DefaultLimits are the API reference's: create 4.5 s (12 s penalty), show
// 2 s, destroy 3 s, list 1 s, search 10 a minute (6 s apart), and the
// price-increase calls 2 s (the specs vast generates from its backend:
// x-rateLimit 2.0 on the pending list, accept and reject; one slot for
// the three).
func DefaultLimits() Limits {
	return Limits{
		Interval: map[string]time.Duration{
			EpSearch: 6 * time.Second, EpCreate: 4500 * time.Millisecond, EpShow: 2 * time.Second,
			EpList: time.Second, EpDestroy: 3 * time.Second, epPrice: 2 * time.Second,
		},
		Penalty: map[string]time.Duration{EpCreate: 12 * time.Second},
	}
}

// Scale returns the limits multiplied by f (tests run vast's ratios fast).
func (l Limits) Scale(f float64) Limits {
	out := Limits{Interval: map[string]time.Duration{}, Penalty: map[string]time.Duration{}}
	for k, v := range l.Interval {
		out.Interval[k] = time.Duration(float64(v) * f)
	}
	for k, v := range l.Penalty {
		out.Penalty[k] = time.Duration(float64(v) * f)
	}
	return out
}

// Pacer is the account's one request scheduler. Each endpoint has one
// request in flight at a time, and the next leaves at least its interval
// after the previous one's answer came back: vast received that request
// before it answered, so the two are at least the interval apart at vast
// whatever the network did to either. A 429 pushes the endpoint's next
// slot out, doubling while 429s repeat.
type Pacer struct {
	lim   Limits
	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	mu      sync.Mutex
	turn    map[string]chan struct{} // one request in flight per endpoint
	next    map[string]time.Time
	strikes map[string]int
	sent    map[string]int
}

// NewPacer returns a pacer; now and sleep are injected for tests.
func NewPacer(lim Limits, now func() time.Time, sleep func(context.Context, time.Duration) error) *Pacer {
	lim = lim.Scale(1) // a copy: Raise changes it
	return &Pacer{lim: lim, now: now, sleep: sleep, turn: map[string]chan struct{}{},
		next: map[string]time.Time{}, strikes: map[string]int{}, sent: map[string]int{}}
}

// interval is the endpoint's interval plus 2% (clocks differ a little).
func (p *Pacer) interval(ep string) time.Duration {
	iv := p.lim.Interval[ep]
	return iv + iv/50
}

// Wait blocks until it is ep's turn and its next slot has come; the
// request is then sent, and done called once its answer is in.
func (p *Pacer) Wait(ctx context.Context, ep string) (done func(), err error) {
	p.mu.Lock()
	t := p.turn[ep]
	if t == nil {
		t = make(chan struct{}, 1)
		p.turn[ep] = t
	}
	p.mu.Unlock()
	select {
	case t <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	d := p.next[ep].Sub(p.now())
	p.sent[ep]++
	p.mu.Unlock()
	if d > 0 {
		if err := p.sleep(ctx, d); err != nil {
			<-t
			return nil, err
		}
	}
	return func() {
		p.mu.Lock()
		if at := p.now().Add(p.interval(ep)); at.After(p.next[ep]) {
			p.next[ep] = at
		}
		p.mu.Unlock()
		<-t
	}, nil
}

// maxBackoff bounds the wait after repeated 429s.
const maxBackoff = time.Minute

// Limited records a 429 on ep: its next slot moves to now + (interval +
// penalty) × 2^(429s in a row − 1), at most a minute.
func (p *Pacer) Limited(ep string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.strikes[ep]++
	d := p.interval(ep) + p.lim.Penalty[ep]
	if d <= 0 {
		d = 100 * time.Millisecond
	}
	for i := 1; i < p.strikes[ep] && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	if at := p.now().Add(d); at.After(p.next[ep]) {
		p.next[ep] = at
	}
	return d
}

// Delay moves ep's next slot to at least now + d (a 5xx: retry soon, but
// never sooner than vast's interval).
func (p *Pacer) Delay(ep string, d time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if at := now.Add(d); at.After(p.next[ep]) {
		p.next[ep] = at
	}
	return p.next[ep].Sub(now)
}

// Raise makes ep's interval at least d (vast's 429 named a stricter
// threshold); true when it grew.
func (p *Pacer) Raise(ep string, d time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d <= p.lim.Interval[ep] {
		return false
	}
	if p.lim.Interval == nil {
		p.lim.Interval = map[string]time.Duration{}
	}
	p.lim.Interval[ep] = d
	return true
}

// OK records an answer that was not a 429: the backoff starts over.
func (p *Pacer) OK(ep string) {
	p.mu.Lock()
	delete(p.strikes, ep)
	p.mu.Unlock()
}

// Sent returns how many requests each endpoint was given a slot for.
func (p *Pacer) Sent() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.sent))
	for k, v := range p.sent {
		out[k] = v
	}
	return out
}
