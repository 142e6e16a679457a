package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
)

var t0 = time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)

type fakeCluster struct {
	cands []wire.Candidate
	n     int
}

func (f *fakeCluster) Candidates(context.Context) ([]wire.Candidate, error) {
	return append([]wire.Candidate(nil), f.cands...), nil
}

func (f *fakeCluster) Create(_ context.Context, nt string) (wire.Candidate, error) {
	f.n++
	c := wire.Candidate{CandidateID: fmt.Sprintf("new%d", f.n), NodeType: nt, State: wire.StatePending, CreatedAt: t0}
	f.cands = append(f.cands, c)
	return c, nil
}

func (f *fakeCluster) End(_ context.Context, id, reason string) error {
	for i := range f.cands {
		if f.cands[i].CandidateID == id {
			f.cands[i].State, f.cands[i].Reason = wire.StateEnded, reason
			return nil
		}
	}
	return fmt.Errorf("no candidate %s", id)
}

// Reprice implements Repricer.
func (f *fakeCluster) Reprice(_ context.Context, id string, dph float64) error {
	for i := range f.cands {
		if f.cands[i].CandidateID == id {
			f.cands[i].DPHTotal = dph
			return nil
		}
	}
	return fmt.Errorf("no candidate %s", id)
}

type fakeRentals struct {
	list      []provider.Rental
	destroyed []string
}

func (f *fakeRentals) List(context.Context) ([]provider.Rental, error) { return f.list, nil }
func (f *fakeRentals) Destroy(_ context.Context, id string) error {
	f.destroyed = append(f.destroyed, id)
	return nil
}

type fakeFirewall struct{ ips []string }

func (f *fakeFirewall) Sync(ips []string) error { f.ips = ips; return nil }

func cand(id, nt, state string, age time.Duration, ip string) wire.Candidate {
	return wire.Candidate{CandidateID: id, NodeType: nt, State: state, PublicIP: ip, CreatedAt: t0.Add(-age), UpdatedAt: t0.Add(-age)}
}

func ended(id, nt, reason string, ago time.Duration) wire.Candidate {
	c := cand(id, nt, wire.StateEnded, ago, "")
	c.Reason = reason
	return c
}

// TestTick: one pass of the loop against a table of cluster states.
func TestTick(t *testing.T) {
	gpu := map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 3}}
	tests := []struct {
		name          string
		types         map[string]wire.NodeType
		cands         []wire.Candidate
		rentals       []provider.Rental
		down          bool
		wantCreated   map[string]int
		wantEnded     map[string]string
		wantDestroyed []string
		wantAllowed   []string
	}{
		{name: "empty: rent min_workers", types: gpu,
			wantCreated: map[string]int{"gpu": 2}},
		{name: "enrolled + in flight reach min: nothing", types: gpu,
			cands:       []wire.Candidate{cand("a", "gpu", wire.StateEnrolled, time.Hour, "10.0.0.1"), cand("b", "gpu", wire.StateRunning, time.Minute, "10.0.0.2")},
			wantAllowed: []string{"10.0.0.1", "10.0.0.2"}},
		{name: "a recent failure: rent a spare", types: gpu,
			cands:       []wire.Candidate{ended("x", "gpu", "security_check", time.Minute)},
			wantCreated: map[string]int{"gpu": 3}},
		{name: "an old failure: no spare", types: gpu,
			cands:       []wire.Candidate{ended("x", "gpu", "port_check", 2*time.Hour)},
			wantCreated: map[string]int{"gpu": 2}},
		{name: "deleted or scaled down is not a failure", types: gpu,
			cands:       []wire.Candidate{ended("x", "gpu", "deleted", time.Minute), ended("y", "gpu", ReasonScaleDown, time.Minute)},
			wantCreated: map[string]int{"gpu": 2}},
		{name: "enroll timeout ends and replaces, with a spare", types: gpu,
			cands: []wire.Candidate{cand("slow", "gpu", wire.StateRunning, 16*time.Minute, "10.0.0.3"), cand("ok", "gpu", wire.StateEnrolled, time.Hour, "10.0.0.4")},
			// enrolled 1 of min 2, one failure: deficit 1 + spare 1
			wantCreated: map[string]int{"gpu": 2}, wantEnded: map[string]string{"slow": ReasonEnrollTimeout},
			wantAllowed: []string{"10.0.0.4"}},
		{name: "lost node ended and replaced", types: gpu,
			cands:       []wire.Candidate{cand("l", "gpu", wire.StateLost, time.Hour, "10.0.0.5"), cand("e", "gpu", wire.StateEnrolled, time.Hour, "10.0.0.6")},
			wantCreated: map[string]int{"gpu": 2}, wantEnded: map[string]string{"l": ReasonLost},
			wantAllowed: []string{"10.0.0.6"}},
		{name: "above max: newest in-flight ended, enrolled kept",
			types: map[string]wire.NodeType{"cpu": {MinWorkers: 0, MaxWorkers: 2}},
			cands: []wire.Candidate{cand("e1", "cpu", wire.StateEnrolled, 3*time.Hour, "10.0.1.1"), cand("p1", "cpu", wire.StatePending, 3*time.Minute, ""),
				cand("p2", "cpu", wire.StateRented, 2*time.Minute, ""), cand("p3", "cpu", wire.StateRunning, time.Minute, "10.0.1.4")},
			wantEnded:   map[string]string{"p3": ReasonScaleDown, "p2": ReasonScaleDown},
			wantAllowed: []string{"10.0.1.1"}},
		{name: "enrolled above max are not ended",
			types:       map[string]wire.NodeType{"cpu": {MaxWorkers: 1}},
			cands:       []wire.Candidate{cand("e1", "cpu", wire.StateEnrolled, time.Hour, "10.0.1.1"), cand("e2", "cpu", wire.StateEnrolled, time.Hour, "10.0.1.2")},
			wantAllowed: []string{"10.0.1.1", "10.0.1.2"}},
		{name: "min capped by max", types: map[string]wire.NodeType{"cpu": {MinWorkers: 1, MaxWorkers: 1}},
			cands:       []wire.Candidate{ended("f", "cpu", "egress", time.Minute)},
			wantCreated: map[string]int{"cpu": 2}}, // 1 + spare, cap max+spare
		{name: "leaks destroyed, live rentals kept", types: map[string]wire.NodeType{"cpu": {MaxWorkers: 2}},
			cands: []wire.Candidate{cand("live", "cpu", wire.StateRented, time.Minute, ""), ended("gone", "cpu", "deleted", time.Minute)},
			rentals: []provider.Rental{{CandidateID: "live", InstanceID: "i1"}, {CandidateID: "gone", InstanceID: "i2"},
				{CandidateID: "stranger", InstanceID: "i3"}},
			wantDestroyed: []string{"i2", "i3"}},
		{name: "down: everything ended and destroyed, nothing rented", types: gpu, down: true,
			cands: []wire.Candidate{cand("e", "gpu", wire.StateEnrolled, time.Hour, "10.0.0.1"), cand("r", "gpu", wire.StateRunning, time.Minute, "10.0.0.2"),
				cand("p", "gpu", wire.StatePending, time.Minute, "")},
			rentals:   []provider.Rental{{CandidateID: "e", InstanceID: "i1"}, {CandidateID: "r", InstanceID: "i2"}},
			wantEnded: map[string]string{"e": ReasonDown, "r": ReasonDown, "p": ReasonDown}, wantDestroyed: []string{"i1", "i2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := &fakeCluster{cands: tt.cands}
			rs := &fakeRentals{list: tt.rentals}
			fw := &fakeFirewall{}
			downFile := filepath.Join(t.TempDir(), DownFileName)
			if tt.down {
				os.WriteFile(downFile, nil, 0o600)
			}
			l := New(Config{Cluster: cl, Rentals: rs, Firewall: fw, NodeTypes: tt.types, DownFile: downFile, Now: func() time.Time { return t0 }})
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
			sort.Strings(rs.destroyed)
			if fmt.Sprint(rs.destroyed) != fmt.Sprint(tt.wantDestroyed) {
				t.Errorf("destroyed = %v, want %v", rs.destroyed, tt.wantDestroyed)
			}
			if tt.wantAllowed == nil {
				tt.wantAllowed = []string{}
			}
			if !reflect.DeepEqual(fw.ips, tt.wantAllowed) {
				t.Errorf("firewall = %v, want %v", fw.ips, tt.wantAllowed)
			}
		})
	}
}

// TestConverges: repeated ticks over a cluster where candidates fail or
// enroll settle at min_workers enrolled with no extra rentals.
func TestConverges(t *testing.T) {
	now := t0
	cl := &fakeCluster{}
	l := New(Config{Cluster: cl, NodeTypes: map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 4}}, Now: func() time.Time { return now }})
	fails := 2 // the first two candidates fail their checks
	for i := 0; i < 10; i++ {
		if _, err := l.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		for j := range cl.cands {
			c := &cl.cands[j]
			if c.State != wire.StatePending {
				continue
			}
			if fails > 0 {
				fails--
				c.State, c.Reason, c.UpdatedAt = wire.StateEnded, "security_check", now
			} else {
				c.State = wire.StateEnrolled
			}
		}
		now = now.Add(5 * time.Second)
	}
	enrolled, live := 0, 0
	for _, c := range cl.cands {
		if c.State == wire.StateEnrolled {
			enrolled++
		}
		if c.State != wire.StateEnded {
			live++
		}
	}
	// Two enrolled plus at most the one spare rented while failures were fresh.
	if enrolled < 2 || enrolled > 3 || live != enrolled {
		t.Errorf("enrolled = %d, live = %d; want 2..3 enrolled and nothing else live (%d candidates made)", enrolled, live, len(cl.cands))
	}
}

// TestRunRemovesStaleDownMarker: serving again after `head down` wants the
// cluster back.
func TestRunRemovesStaleDownMarker(t *testing.T) {
	f := filepath.Join(t.TempDir(), DownFileName)
	os.WriteFile(f, nil, 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	New(Config{Cluster: &fakeCluster{}, DownFile: f}).Run(ctx)
	if _, err := os.Stat(f); !os.IsNotExist(err) {
		t.Errorf("marker still there: %v", err)
	}
}

// TestSpareCancelled: a spare rented after a failure is ended before it
// enrolls once the deficit is met; a candidate that was not a spare is kept.
func TestSpareCancelled(t *testing.T) {
	cl := &fakeCluster{cands: []wire.Candidate{
		cand("e", "gpu", wire.StateEnrolled, time.Hour, "10.0.0.1"),
		ended("f", "gpu", "port_check", time.Minute),
	}}
	l := New(Config{Cluster: cl, NodeTypes: map[string]wire.NodeType{"gpu": {MinWorkers: 2, MaxWorkers: 4}}, Now: func() time.Time { return t0 }})
	res, err := l.Tick(context.Background())
	if err != nil || res.Created["gpu"] != 2 {
		t.Fatalf("first tick created %v (%v), want 2 (deficit 1 + spare 1)", res.Created, err)
	}
	cl.cands[2].State = wire.StateEnrolled // new1 (the deficit) enrolls; new2 is the spare
	res, err = l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"new2": ReasonSpareUnneeded}
	if !reflect.DeepEqual(res.Ended, want) || len(res.Created) != 0 {
		t.Errorf("second tick ended %v created %v, want %v and nothing created", res.Ended, res.Created, want)
	}
}

// TestSweepSpacing: the provider is listed on the first tick, then once per
// SweepEvery, and on every tick at down.
func TestSweepSpacing(t *testing.T) {
	now := t0
	rs := &countingRentals{}
	down := filepath.Join(t.TempDir(), DownFileName)
	l := New(Config{Cluster: &fakeCluster{}, Rentals: rs, SweepEvery: 30 * time.Second, DownFile: down, Now: func() time.Time { return now }})
	for i := 0; i < 7; i++ { // 0 s … 30 s
		l.Tick(context.Background())
		now = now.Add(5 * time.Second)
	}
	if rs.lists != 2 {
		t.Errorf("lists in 30 s = %d, want 2", rs.lists)
	}
	os.WriteFile(down, nil, 0o600)
	l.Tick(context.Background())
	l.Tick(context.Background())
	if rs.lists != 4 {
		t.Errorf("lists after 2 down ticks = %d, want 4", rs.lists)
	}
}

type countingRentals struct{ lists int }

func (c *countingRentals) List(context.Context) ([]provider.Rental, error) {
	c.lists++
	return nil, nil
}
func (c *countingRentals) Destroy(context.Context, string) error { return nil }
