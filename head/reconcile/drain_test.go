package reconcile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
)

// fakeDrainer is Ray as the loop sees it: it records the drains asked for
// (and whether the node's rental was still there when asked), fails them
// when err is set, and says a node drained once drained holds it.
type fakeDrainer struct {
	err       error
	asked     []string
	deadlines map[string]time.Time
	drained   map[string]bool
	rentedAt  []bool // per drain: the node's instance not yet destroyed
	rentals   *fakeRentals
	cluster   *fakeCluster
}

func (f *fakeDrainer) Drain(_ context.Context, c wire.Candidate, _ string, deadline time.Time) error {
	f.asked = append(f.asked, c.CandidateID)
	f.deadlines[c.CandidateID] = deadline
	live := !slices.Contains(f.rentals.destroyed, c.InstanceID)
	for _, x := range f.cluster.cands {
		if x.CandidateID == c.CandidateID && x.State == wire.StateEnded {
			live = false
		}
	}
	f.rentedAt = append(f.rentedAt, live)
	return f.err
}

func (f *fakeDrainer) Drained(_ context.Context, c wire.Candidate) (bool, error) {
	if f.err != nil {
		return false, f.err
	}
	return f.drained[c.CandidateID], nil
}

// drainEnv is one enrolled node n1 (instance i1, rented) and a down marker.
func drainEnv(t *testing.T, err error) (*fakeCluster, *fakeRentals, *fakeDrainer, *Loop, *time.Time) {
	t.Helper()
	c := cand("n1", "cpu", wire.StateEnrolled, time.Hour, "198.51.100.1")
	c.InstanceID = "i1"
	fc := &fakeCluster{cands: []wire.Candidate{c}}
	fr := &fakeRentals{list: []provider.Rental{{InstanceID: "i1", CandidateID: "n1"}}}
	fd := &fakeDrainer{err: err, deadlines: map[string]time.Time{}, drained: map[string]bool{}, rentals: fr, cluster: fc}
	down := filepath.Join(t.TempDir(), "down")
	if err := os.WriteFile(down, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	now := t0
	l := New(Config{Cluster: fc, Rentals: fr, Drainer: fd, DrainDeadline: time.Minute, DownFile: down, Drains: &Drains{},
		NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 1, MaxWorkers: 1}}, Now: func() time.Time { return now }})
	return fc, fr, fd, l, &now
}

func tickOK(t *testing.T, l *Loop) Result {
	t.Helper()
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestDownDrainsFirst: at `head down` an enrolled node is drained in Ray
// before anything of it ends (the drain asked while its candidate is live
// and its instance rented, with the deadline DrainDeadline on), its rental
// kept while Ray drains (and port B's Drains naming it, with the deadline,
// so the node hears of it), and ended down (its instance destroyed) on the
// first pass after Ray shows it drained, well before the deadline.
func TestDownDrainsFirst(t *testing.T) {
	fc, fr, fd, l, now := drainEnv(t, nil)
	res := tickOK(t, l)
	if !slices.Equal(fd.asked, []string{"n1"}) || !fd.rentedAt[0] || !fd.deadlines["n1"].Equal(t0.Add(time.Minute)) {
		t.Fatalf("first pass: drains %v (rented when asked %v, deadline %v); want n1 drained while rented, deadline +1m", fd.asked, fd.rentedAt, fd.deadlines["n1"])
	}
	if len(res.Ended) != 0 || len(fr.destroyed) != 0 {
		t.Fatalf("first pass: ended %v destroyed %v; want nothing while Ray drains", res.Ended, fr.destroyed)
	}
	if d, ok := l.cfg.Drains.Of("i1"); !ok || !d.Equal(t0.Add(time.Minute)) {
		t.Fatalf("first pass: port B's drains say i1 %v %v; want draining, deadline +1m (the node is told)", d, ok)
	}
	*now = now.Add(10 * time.Second)
	if res = tickOK(t, l); len(res.Ended) != 0 || len(fr.destroyed) != 0 || len(fd.asked) != 1 {
		t.Fatalf("still draining: ended %v destroyed %v drains %v; want nothing more", res.Ended, fr.destroyed, fd.asked)
	}
	fd.drained["n1"] = true
	*now = now.Add(5 * time.Second)
	if res = tickOK(t, l); res.Ended["n1"] != ReasonDown {
		t.Fatalf("drained: ended %v; want n1 %s at once", res.Ended, ReasonDown)
	}
	if _, ok := l.cfg.Drains.Of("i1"); ok {
		t.Error("ended: port B's drains still name i1")
	}
	fr.list = nil // the head's driver destroyed it
	if res = tickOK(t, l); len(fd.asked) != 1 || fc.cands[0].State != wire.StateEnded {
		t.Errorf("after the end: drains %v, n1 %s; want one drain, n1 ended", fd.asked, fc.cands[0].State)
	}
}

// TestDrainDeadline: a node Ray does not show drained is ended at the
// deadline, not before and not later; a drain Ray refuses (its head down)
// does not hold the end past the deadline either.
func TestDrainDeadline(t *testing.T) {
	for _, err := range []error{nil, errors.New("ray drain-node: GCS unreachable")} {
		_, fr, fd, l, now := drainEnv(t, err)
		tickOK(t, l)
		*now = now.Add(59 * time.Second)
		if res := tickOK(t, l); len(res.Ended) != 0 || len(fr.destroyed) != 0 {
			t.Fatalf("drain err %v, 1 s before the deadline: ended %v destroyed %v; want the node kept", err, res.Ended, fr.destroyed)
		}
		*now = now.Add(time.Second)
		if res := tickOK(t, l); res.Ended["n1"] != ReasonDown {
			t.Errorf("drain err %v, at the deadline: ended %v; want n1 %s", err, res.Ended, ReasonDown)
		}
		if len(fd.asked) != 1 {
			t.Errorf("drain err %v: drains %v; want one", err, fd.asked)
		}
	}
}

// TestNoRayEndsAtOnce: with no Ray head to ask (ErrNoRay) the node is
// ended in the same pass: nothing to wait for.
func TestNoRayEndsAtOnce(t *testing.T) {
	_, _, _, l, _ := drainEnv(t, ErrNoRay)
	if res := tickOK(t, l); res.Ended["n1"] != ReasonDown {
		t.Errorf("ended %v; want n1 %s at once", res.Ended, ReasonDown)
	}
}

// TestContractEndDrains: a node whose contract ends is drained once its
// replacement enrolled, kept (and counted) while Ray drains, its deadline
// never past the contract's end, and ended contract_end once drained.
func TestContractEndDrains(t *testing.T) {
	c := cand("n1", "cpu", wire.StateEnrolled, time.Hour, "198.51.100.1")
	c.InstanceID = "i1"
	fc := &fakeCluster{cands: []wire.Candidate{c}}
	end := t0.Add(90 * time.Second)
	fr := &fakeRentals{list: []provider.Rental{{InstanceID: "i1", CandidateID: "n1", EndsAt: end}}}
	fd := &fakeDrainer{deadlines: map[string]time.Time{}, drained: map[string]bool{}, rentals: fr, cluster: fc}
	now := t0
	l := New(Config{Cluster: fc, Rentals: fr, Drainer: fd, DrainDeadline: 5 * time.Minute, ReplaceBefore: time.Hour, Every: time.Second, SweepEvery: time.Second,
		NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 1, MaxWorkers: 1}}, Now: func() time.Time { return now }})
	if res := tickOK(t, l); res.Created["cpu"] != 1 || len(fd.asked) != 0 {
		t.Fatalf("first pass: created %v drains %v; want a replacement, no drain yet", res.Created, fd.asked)
	}
	fc.cands[1].State, fc.cands[1].InstanceID = wire.StateEnrolled, "i2"
	fr.list = append(fr.list, provider.Rental{InstanceID: "i2", CandidateID: "new1"})
	now = now.Add(time.Second)
	if res := tickOK(t, l); len(res.Ended) != 0 || !slices.Equal(fd.asked, []string{"n1"}) || !fd.deadlines["n1"].Equal(end) {
		t.Fatalf("replacement enrolled: ended %v drains %v deadline %v; want n1 drained, deadline its contract's end %v", res.Ended, fd.asked, fd.deadlines["n1"], end)
	}
	fd.drained["n1"] = true
	now = now.Add(time.Second)
	if res := tickOK(t, l); res.Ended["n1"] != ReasonContractEnd || len(res.Created) != 0 || slices.Contains(fr.destroyed, "i2") {
		t.Errorf("drained: ended %v created %v destroyed %v; want n1 %s only", res.Ended, res.Created, fr.destroyed, ReasonContractEnd)
	}
}
