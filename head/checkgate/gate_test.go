package checkgate

import (
	"context"
	"errors"
	"testing"
	"time"
)

// pressure is a scripted Pressure: every Tick reads what the test set.
type pressure struct {
	p  time.Duration
	ok bool
}

func (s *pressure) read() (time.Duration, bool) { return s.p, s.ok }

func newGate(min, max int) (*Gate, *pressure) {
	s := &pressure{ok: true}
	return New(Config{Min: min, Max: max, Target: 10 * time.Millisecond, Pressure: s.read}), s
}

// acquired reports whether ch delivered a release func (the turn came).
func acquired(ch <-chan func()) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func acquireAsync(t *testing.T, g *Gate) <-chan func() {
	t.Helper()
	ch := make(chan func(), 1)
	go func() {
		rel, err := g.Acquire(context.Background())
		if err != nil {
			t.Errorf("Acquire: %v", err)
			return
		}
		ch <- rel
	}()
	return ch
}

// waitQueued waits until n callers are queued (no sleeping guesses: the
// gate's own count).
func waitQueued(t *testing.T, g *Gate, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for g.Stats().Waiting != n {
		if time.Now().After(deadline) {
			t.Fatalf("waiting = %d, want %d", g.Stats().Waiting, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGateStartsAtMinAndQueues proves the gate admits Min at once, queues
// the rest, and admits the next in line when a turn is given back.
func TestGateStartsAtMinAndQueues(t *testing.T) {
	g, _ := newGate(2, 8)
	var rels []func()
	for range 2 {
		rel, err := g.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rels = append(rels, rel)
	}
	third := acquireAsync(t, g)
	waitQueued(t, g, 1)
	if acquired(third) {
		t.Fatal("a third check ran past a limit of 2")
	}
	rels[0]()
	rels[0]() // a second release of the same turn changes nothing
	rel := <-third
	if st := g.Stats(); st.InFlight != 2 || st.Waiting != 0 {
		t.Fatalf("stats after hand-over = %+v, want 2 in flight, none waiting", st)
	}
	rel()
	rels[1]()
	if st := g.Stats(); st.InFlight != 0 {
		t.Fatalf("in flight = %d after every release, want 0", st.InFlight)
	}
}

// TestGateFIFO proves waiting checks are admitted in arrival order.
func TestGateFIFO(t *testing.T) {
	g, _ := newGate(1, 1)
	first, _ := g.Acquire(context.Background())
	var order []<-chan func()
	for i := range 5 {
		order = append(order, acquireAsync(t, g))
		waitQueued(t, g, i+1)
	}
	release := first
	for i, ch := range order {
		release()
		select {
		case release = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d not admitted after its predecessor left", i)
		}
		for j := i + 1; j < len(order); j++ {
			if acquired(order[j]) {
				t.Fatalf("waiter %d admitted before waiter %d", j, i+1)
			}
		}
	}
	release()
}

// TestGateGrowsOnlyWhenQueuedAndCalm proves the additive increase: a
// calm tick with checks waiting raises the limit (and admits them), a calm
// tick with nobody waiting does not, and the limit stops at Max.
func TestGateGrowsOnlyWhenQueuedAndCalm(t *testing.T) {
	g, _ := newGate(2, 4)
	g.Tick()
	if l := g.Stats().Limit; l != 2 {
		t.Fatalf("idle calm tick: limit %d, want 2 (an idle gate keeps its limit)", l)
	}
	var held []func()
	want := []int{3, 4, 4} // +max(1, limit/8) per calm queued tick, capped at Max
	for _, w := range want {
		for g.Stats().InFlight < g.Stats().Limit {
			rel, _ := g.Acquire(context.Background())
			held = append(held, rel)
		}
		ch := acquireAsync(t, g)
		waitQueued(t, g, 1)
		g.Tick()
		if l := g.Stats().Limit; l != w {
			t.Fatalf("limit after a calm queued tick = %d, want %d", l, w)
		}
		if g.Stats().Waiting == 1 {
			// at Max the tick cannot admit it: it waits for a turn back
			held[0]()
			held = held[1:]
		}
		held = append(held, <-ch)
	}
	for _, r := range held {
		r()
	}
	if st := g.Stats(); st.InFlight != 0 {
		t.Fatalf("in flight = %d after every release", st.InFlight)
	}
}

// TestGateShrinksUnderPressure proves the multiplicative decrease and the
// floor: a tick whose scheduling latency passed the target takes a quarter
// off the limit, never below Min; running checks are not interrupted.
func TestGateShrinksUnderPressure(t *testing.T) {
	g, s := newGate(2, 64)
	g.limit = 40
	var rels []func()
	for range 40 {
		rel, _ := g.Acquire(context.Background())
		rels = append(rels, rel)
	}
	s.p = 50 * time.Millisecond
	g.Tick()
	if l := g.Stats().Limit; l != 30 {
		t.Fatalf("limit after one hot tick = %d, want 30", l)
	}
	if st := g.Stats(); st.InFlight != 40 {
		t.Fatalf("in flight = %d: a hot tick must not interrupt running checks", st.InFlight)
	}
	for range 20 {
		g.Tick()
	}
	if l := g.Stats().Limit; l != 2 {
		t.Fatalf("limit after many hot ticks = %d, want Min 2", l)
	}
	for _, r := range rels[:39] {
		r()
	}
	// 1 in flight, limit 2: one more gets in at once, the next waits.
	r2, _ := g.Acquire(context.Background())
	w := acquireAsync(t, g)
	waitQueued(t, g, 1)
	s.ok = false // nothing scheduled: no evidence of pressure, so it may grow
	g.Tick()
	(<-w)()
	rels[39]()
	r2()
}

// TestGateAcquireCancelled proves a waiter whose context ends leaves the
// queue with the context's error and takes no turn.
func TestGateAcquireCancelled(t *testing.T) {
	g, _ := newGate(1, 1)
	hold, _ := g.Acquire(context.Background())
	cause := errors.New("waited too long")
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := g.Acquire(ctx)
		errc <- err
	}()
	waitQueued(t, g, 1)
	cancel(cause)
	if err := <-errc; !errors.Is(err, cause) {
		t.Fatalf("Acquire after cancel: %v, want %v", err, cause)
	}
	if st := g.Stats(); st.Waiting != 0 || st.InFlight != 1 {
		t.Fatalf("stats = %+v, want the holder alone", st)
	}
	hold()
	if rel, err := g.Acquire(context.Background()); err != nil {
		t.Fatalf("gate stuck after a cancelled waiter: %v", err)
	} else {
		rel()
	}
}

// TestQuantile proves the p99 read from a histogram delta: the upper edge
// of the bucket holding the 99th percentile, the open last bucket read as
// its lower edge, and an empty delta as no evidence.
func TestQuantile(t *testing.T) {
	buckets := []float64{0, 0.001, 0.01, 0.1, 1e300}
	if _, ok := quantile([]uint64{0, 0, 0, 0}, buckets, 0.99); ok {
		t.Fatal("empty histogram reported a latency")
	}
	if d, _ := quantile([]uint64{100, 0, 0, 0}, buckets, 0.99); d != time.Millisecond {
		t.Fatalf("all under 1 ms: p99 %v, want 1ms", d)
	}
	if d, _ := quantile([]uint64{97, 0, 3, 0}, buckets, 0.99); d != 100*time.Millisecond {
		t.Fatalf("3%% in 10–100 ms: p99 %v, want 100ms", d)
	}
	if d, _ := quantile([]uint64{0, 0, 0, 5}, buckets, 0.99); d != 100*time.Millisecond {
		t.Fatalf("all in the open bucket: p99 %v, want its lower edge 100ms", d)
	}
}

// TestSchedLatencyReads proves the real Pressure reads this runtime's
// histogram: after goroutines were scheduled it reports a latency.
func TestSchedLatencyReads(t *testing.T) {
	p := SchedLatency()
	p()
	done := make(chan struct{})
	for range 100 {
		go func() { done <- struct{}{} }()
	}
	for range 100 {
		<-done
	}
	if _, ok := p(); !ok {
		t.Fatal("no scheduling latencies recorded after 100 goroutines ran")
	}
}
