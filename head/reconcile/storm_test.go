package reconcile

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestNoRentStorm: when every candidate fails (a wrong image, a broken
// account), the loop stops renting after MaxFailures failures within
// PauseWindow, says so once in the log, and resumes when the window has
// passed: a systematic failure costs a bounded number of rentals per window.
func TestNoRentStorm(t *testing.T) {
	now := t0
	cl := &fakeCluster{}
	var logs bytes.Buffer
	l := New(Config{Cluster: cl, NodeTypes: map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 4}},
		MaxFailures: 6, PauseWindow: 30 * time.Minute,
		Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	tick := func() {
		if _, err := l.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		for j := range cl.cands { // every rental fails at once
			if c := &cl.cands[j]; c.State == wire.StatePending {
				c.State, c.Reason, c.UpdatedAt = wire.StateEnded, "rent_failed", now
			}
		}
		now = now.Add(5 * time.Second)
	}
	for now.Before(t0.Add(29 * time.Minute)) {
		tick()
	}
	// Up to MaxFailures failed, plus the in-flight ones of the tick that hit
	// the bound (deficit 2 + spare 1).
	if got, max := len(cl.cands), 6+3; got > max {
		t.Fatalf("candidates made in 29 min of failures = %d, want at most %d", got, max)
	}
	if n := strings.Count(logs.String(), "renting paused"); n != 1 {
		t.Errorf("'renting paused' logged %d times, want once:\n%s", n, logs.String())
	}
	made := len(cl.cands)
	for now.Before(t0.Add(31 * time.Minute)) {
		tick()
	}
	if len(cl.cands) == made {
		t.Errorf("no candidate made after the failure window passed")
	}
	if !strings.Contains(logs.String(), "renting resumed") {
		t.Errorf("no 'renting resumed' line:\n%s", logs.String())
	}
}

// TestPauseKeepsInFlightSpares: a pause stops new rentals but does not end
// candidates already in flight (one of them may be the one that works).
func TestPauseKeepsInFlightSpares(t *testing.T) {
	cl := &fakeCluster{}
	for _, id := range []string{"f1", "f2", "f3"} {
		cl.cands = append(cl.cands, ended(id, "gpu", "egress", time.Minute))
	}
	cl.cands = append(cl.cands, cand("p1", "gpu", wire.StatePending, time.Minute, ""), cand("p2", "gpu", wire.StatePending, time.Minute, ""))
	l := New(Config{Cluster: cl, NodeTypes: map[string]wire.NodeType{"gpu": {MinWorkers: 3, MaxWorkers: 4}}, MaxFailures: 3, Now: func() time.Time { return t0 }})
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 0 || len(res.Ended) != 0 {
		t.Errorf("paused tick created %v ended %v, want nothing", res.Created, res.Ended)
	}
}

// TestSweepDuplicateRental: a second rental labelled with a live candidate
// whose instance is already recorded (a create vast ran twice) is a leak;
// a rental of a candidate not yet patched with its instance (Rent just
// returned) is kept.
func TestSweepDuplicateRental(t *testing.T) {
	rec := cand("rec", "cpu", wire.StateRunning, time.Minute, "10.0.0.1")
	rec.InstanceID = "i1"
	fresh := cand("fresh", "cpu", wire.StatePending, time.Second, "")
	cl := &fakeCluster{cands: []wire.Candidate{rec, fresh}}
	rs := &fakeRentals{list: []provider.Rental{{CandidateID: "rec", InstanceID: "i1"}, {CandidateID: "rec", InstanceID: "i9"},
		{CandidateID: "fresh", InstanceID: "i2"}}}
	l := New(Config{Cluster: cl, Rentals: rs, NodeTypes: map[string]wire.NodeType{"cpu": {MaxWorkers: 2}}, Now: func() time.Time { return t0 }})
	if _, err := l.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rs.destroyed, ","); got != "i9" {
		t.Errorf("destroyed %q, want i9 only", got)
	}
}

// TestSlowFailuresBounded: a wrong image fails slowly (no candidate ever
// enrolls; each is ended at the enroll timeout), too slowly for the spare
// window; PauseWindow still bounds the rentals to MaxFailures per window.
func TestSlowFailuresBounded(t *testing.T) {
	now := t0
	cl := &fakeCluster{}
	l := New(Config{Cluster: cl, NodeTypes: map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 4}},
		Now: func() time.Time { return now }})
	for end := t0.Add(4 * time.Hour); now.Before(end); now = now.Add(5 * time.Second) {
		if _, err := l.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		for j := range cl.cands { // the fake's End leaves UpdatedAt: set it
			if c := &cl.cands[j]; c.State == wire.StateEnded && c.UpdatedAt.Before(c.CreatedAt.Add(time.Second)) {
				c.UpdatedAt = now
			}
			if c := &cl.cands[j]; c.State == wire.StatePending && c.CreatedAt.Equal(t0) {
				c.CreatedAt, c.UpdatedAt = now, now
			}
		}
	}
	// Default 10 failures per 2 h: at most 2×10 over 4 h plus those in flight.
	if got, max := len(cl.cands), 2*10+3; got > max {
		t.Errorf("candidates rented in 4 h of enroll timeouts = %d, want at most %d", got, max)
	}
}

// TestNoSlotIsNotAFailure: a healthy candidate ended because every slot
// was taken (a spare that enrolled late) says nothing bad about renting:
// it neither rents spares nor pauses renting.
func TestNoSlotIsNotAFailure(t *testing.T) {
	cl := &fakeCluster{}
	for i := 0; i < 12; i++ {
		cl.cands = append(cl.cands, ended(fmt.Sprintf("s%d", i), "gpu", wire.ReasonNoSlot, time.Minute))
	}
	l := New(Config{Cluster: cl, NodeTypes: map[string]wire.NodeType{"gpu": {MinWorkers: 2, MaxWorkers: 4}}, Now: func() time.Time { return t0 }})
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Created["gpu"] != 2 {
		t.Errorf("created %v, want 2 (the deficit, no spare, no pause)", res.Created)
	}
}
