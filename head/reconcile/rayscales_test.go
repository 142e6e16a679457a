package reconcile

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestRayScales: with Ray's autoscaler owning the count, a tick creates
// nothing to reach min_workers and ends nothing above max_workers, but
// still ends lost and late candidates and rents one spare per candidate
// that failed while the loop ran (never twice for one failure, never past
// max_workers, not with spares off, not for what Ray ended itself).
func TestRayScales(t *testing.T) {
	gpu := map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 3}}
	// failedAt is a candidate ended for reason at now+d (after the loop
	// started at t0 when d > 0).
	failedAt := func(id, reason string, d time.Duration) wire.Candidate {
		c := ended(id, "gpu", reason, 0)
		c.UpdatedAt = t0.Add(d)
		return c
	}
	tests := []struct {
		name        string
		spares      int
		cands       []wire.Candidate
		wantCreated map[string]int
		wantEnded   map[string]string
	}{
		{name: "empty: Ray keeps min_workers, not the head"},
		{name: "in flight above max: Ray's to end",
			cands: []wire.Candidate{cand("p1", "gpu", wire.StatePending, time.Minute, ""), cand("p2", "gpu", wire.StatePending, time.Minute, ""),
				cand("p3", "gpu", wire.StateRented, time.Minute, ""), cand("p4", "gpu", wire.StateRunning, time.Minute, "10.0.0.4")}},
		{name: "failed checks: one spare", cands: []wire.Candidate{failedAt("f", wire.ReasonSecurityCheck, time.Second)},
			wantCreated: map[string]int{"gpu": 1}},
		{name: "failed before the loop started: none", cands: []wire.Candidate{failedAt("f", wire.ReasonPortCheck, -time.Second)}},
		{name: "ended by Ray (deleted): none", cands: []wire.Candidate{failedAt("f", "deleted", time.Second)}},
		{name: "lost: ended and replaced", cands: []wire.Candidate{cand("l", "gpu", wire.StateLost, time.Hour, "10.0.0.5")},
			wantCreated: map[string]int{"gpu": 1}, wantEnded: map[string]string{"l": ReasonLost}},
		{name: "late: ended and replaced", cands: []wire.Candidate{cand("s", "gpu", wire.StateRunning, 16*time.Minute, "10.0.0.6")},
			wantCreated: map[string]int{"gpu": 1}, wantEnded: map[string]string{"s": ReasonEnrollTimeout}},
		{name: "at max_workers: none",
			cands: []wire.Candidate{failedAt("f", wire.ReasonEgress, time.Second), cand("e1", "gpu", wire.StateEnrolled, time.Hour, "10.0.1.1"),
				cand("e2", "gpu", wire.StateEnrolled, time.Hour, "10.0.1.2"), cand("p", "gpu", wire.StatePending, time.Minute, "")}},
		{name: "spares off: none", spares: -1, cands: []wire.Candidate{failedAt("f", wire.ReasonSecurityCheck, time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := &fakeCluster{cands: tt.cands}
			now := t0
			l := New(Config{Cluster: cl, NodeTypes: gpu, RayScales: true, Spares: tt.spares, Now: func() time.Time { return now }})
			now = t0.Add(5 * time.Second)
			res, err := l.Tick(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantCreated == nil {
				tt.wantCreated = map[string]int{}
			}
			if tt.wantEnded == nil {
				tt.wantEnded = map[string]string{}
			}
			if !reflect.DeepEqual(res.Created, tt.wantCreated) {
				t.Errorf("created = %v, want %v", res.Created, tt.wantCreated)
			}
			if !reflect.DeepEqual(res.Ended, tt.wantEnded) {
				t.Errorf("ended = %v, want %v", res.Ended, tt.wantEnded)
			}
			// The next tick replaces nothing again.
			now = now.Add(5 * time.Second)
			if res, err = l.Tick(context.Background()); err != nil || len(res.Created) != 0 {
				t.Errorf("second tick created %v (%v), want nothing: each failure is replaced once", res.Created, err)
			}
		})
	}
}

// TestRayScalesPauses: past MaxFailures the loop records the node type as
// paused in Pauses (which the admin API reads to refuse Ray's creates) and
// rents no spare; once the failures age out of the window it resumes.
func TestRayScalesPauses(t *testing.T) {
	now := t0
	var cands []wire.Candidate
	for i := 0; i < 3; i++ {
		c := ended(fmt.Sprintf("f%d", i), "gpu", wire.ReasonRayVersion, 0)
		c.UpdatedAt = t0.Add(time.Second)
		cands = append(cands, c)
	}
	cl := &fakeCluster{cands: cands}
	pauses := &Pauses{}
	l := New(Config{Cluster: cl, NodeTypes: map[string]wire.NodeType{"gpu": {GPUs: 1, MaxWorkers: 4}}, RayScales: true,
		MaxFailures: 3, PauseWindow: time.Hour, Pauses: pauses, Now: func() time.Time { return now }})
	now = t0.Add(5 * time.Second)
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !pauses.Paused("gpu") || len(res.Created) != 0 {
		t.Errorf("3 failures of 3 allowed: paused %v, created %v; want paused and nothing rented", pauses.Paused("gpu"), res.Created)
	}
	now = t0.Add(2 * time.Hour)
	if _, err := l.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pauses.Paused("gpu") {
		t.Error("failures out of the window: still paused")
	}
	if (*Pauses)(nil).Paused("gpu") {
		t.Error("a nil Pauses pauses")
	}
}
