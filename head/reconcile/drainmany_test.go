package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
)

// barrierDrainer is Ray as the loop sees it when each call takes a while:
// every Drain (and every Drained) waits until n calls of its kind are in
// flight together, up to a bound; a call that waited in vain says so.
type barrierDrainer struct {
	n         int
	mu        sync.Mutex
	cond      *sync.Cond
	inDrain   meeting
	inDrained meeting
	deadlines map[string]time.Time
	drained   map[string]bool
	lonely    []string // calls that never saw the others in flight
}

func newBarrierDrainer(n int) *barrierDrainer {
	b := &barrierDrainer{n: n, deadlines: map[string]time.Time{}, drained: map[string]bool{}}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// meet waits, as a call of kind k, until n such calls are in flight
// together (up to 5 s); a call that waited in vain is noted lonely.
func (b *barrierDrainer) meet(k *meeting, what string) {
	k.in++
	if k.in >= b.n {
		k.met = true
		b.cond.Broadcast()
	}
	limit := time.Now().Add(5 * time.Second)
	go func() { time.Sleep(5 * time.Second); b.cond.Broadcast() }()
	for !k.met && time.Now().Before(limit) {
		b.cond.Wait()
	}
	if !k.met {
		b.lonely = append(b.lonely, what)
	}
	if k.in--; k.in == 0 {
		k.met = false
	}
}

// meeting is the calls of one kind in flight.
type meeting struct {
	in  int
	met bool
}

func (b *barrierDrainer) Drain(_ context.Context, c wire.Candidate, _ string, deadline time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deadlines[c.CandidateID] = deadline
	b.meet(&b.inDrain, "drain "+c.CandidateID)
	return nil
}

func (b *barrierDrainer) Drained(_ context.Context, c wire.Candidate) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.meet(&b.inDrained, "drained "+c.CandidateID)
	return b.drained[c.CandidateID], nil
}

// TestDrainsRunTogether: at `head down` the drains of three enrolled
// nodes are asked of Ray in the same pass and at once (each Drain call
// sees the other two in flight: one at a time they would wait in vain),
// each with its own deadline (one node's contract ends before the drain
// deadline would), and read at once on the next pass; each node is ended
// on the pass after Ray shows it drained, the others kept, and one Ray
// never shows drained is ended at its own deadline.
func TestDrainsRunTogether(t *testing.T) {
	var cands []wire.Candidate
	var rentals []provider.Rental
	for i := 1; i <= 3; i++ {
		c := cand(fmt.Sprintf("n%d", i), "cpu", wire.StateEnrolled, time.Hour, fmt.Sprintf("198.51.100.%d", i))
		c.InstanceID = fmt.Sprintf("i%d", i)
		cands = append(cands, c)
		rentals = append(rentals, provider.Rental{InstanceID: c.InstanceID, CandidateID: c.CandidateID})
	}
	rentals[2].EndsAt = t0.Add(30 * time.Second) // n3's contract ends first
	fc := &fakeCluster{cands: cands}
	fr := &fakeRentals{list: rentals}
	fd := newBarrierDrainer(3)
	down := filepath.Join(t.TempDir(), "down")
	if err := os.WriteFile(down, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	now := t0
	l := New(Config{Cluster: fc, Rentals: fr, Drainer: fd, DrainDeadline: time.Minute, DownFile: down, Drains: &Drains{},
		NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 3, MaxWorkers: 3}}, Now: func() time.Time { return now }})
	// noteEnds runs on a sweep; down sweeps every pass, so n3's end is known from the first.
	res := tickOK(t, l)
	if len(fd.deadlines) != 3 || len(fd.lonely) != 0 || len(res.Ended) != 0 {
		t.Fatalf("first pass: drains asked %v, alone %v, ended %v; want all three asked together, none ended", fd.deadlines, fd.lonely, res.Ended)
	}
	for id, want := range map[string]time.Time{"n1": t0.Add(time.Minute), "n2": t0.Add(time.Minute), "n3": t0.Add(30 * time.Second)} {
		if !fd.deadlines[id].Equal(want) {
			t.Errorf("%s's deadline %v, want %v (its own)", id, fd.deadlines[id], want)
		}
		if d, ok := l.cfg.Drains.Of("i" + id[1:]); !ok || !d.Equal(want) {
			t.Errorf("port B's drains for %s: %v %v, want %v", id, d, ok, want)
		}
	}
	fd.drained["n1"] = true
	now = now.Add(10 * time.Second)
	if res = tickOK(t, l); len(fd.lonely) != 0 || res.Ended["n1"] != ReasonDown || len(res.Ended) != 1 {
		t.Fatalf("second pass: alone %v, ended %v; want the three read together, n1 ended only", fd.lonely, res.Ended)
	}
	fd.n = 1 // n3 is at its deadline: only n2's drain is read
	now = t0.Add(30 * time.Second)
	if res = tickOK(t, l); res.Ended["n3"] != ReasonDown || len(res.Ended) != 1 || len(fd.lonely) != 0 {
		t.Fatalf("at n3's deadline: ended %v, alone %v; want n3 only (n2's is later)", res.Ended, fd.lonely)
	}
	now = t0.Add(time.Minute)
	if res = tickOK(t, l); res.Ended["n2"] != ReasonDown {
		t.Fatalf("at n2's deadline: ended %v; want n2", res.Ended)
	}
}
