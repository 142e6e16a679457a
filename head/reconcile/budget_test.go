package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/rentals"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestBudgetStopsCreating: below min_workers, no candidate is created while
// the live rentals cost max_dph_total; an over_budget end is no failure
// (no spare, no pause); once a rental ends, creating resumes.
func TestBudgetStopsCreating(t *testing.T) {
	rented := t0.Add(-time.Hour)
	live := func(id string) wire.Candidate {
		c := cand(id, "gpu", wire.StateEnrolled, time.Hour, "203.0.113.1")
		c.InstanceID, c.DPHTotal, c.RentedAt = "i-"+id, 0.5, &rented
		return c
	}
	fc := &fakeCluster{cands: []wire.Candidate{live("a"), live("b"), ended("x", "gpu", rentals.ReasonOverBudget, time.Minute)}}
	l := New(Config{Cluster: fc, NodeTypes: map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 4, MaxWorkers: 4}},
		MaxDPHTotal: 1.0, Now: func() time.Time { return t0 }})
	res, err := l.Tick(context.Background())
	if err != nil || res.Created["gpu"] != 0 {
		t.Fatalf("at the budget: created %v, %v; want none", res.Created, err)
	}
	fc.cands[1].State = wire.StateEnded
	fc.cands[1].UpdatedAt = t0
	res, _ = l.Tick(context.Background())
	if res.Created["gpu"] != 3 {
		t.Errorf("under the budget: created %d, want 3 (the deficit, no spare: over_budget is no failure)", res.Created["gpu"])
	}
}
