package raydrain

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/internal/wire"
)

// fakeRay answers nodes.py with the nodes named and records drain-node argv.
type fakeRay struct {
	nodes  []Node
	drains [][]string
	envs   [][]string
}

func (f *fakeRay) run(_ context.Context, argv, env []string) ([]byte, error) {
	f.envs = append(f.envs, env)
	if slices.Contains(argv, "drain-node") {
		f.drains = append(f.drains, argv)
		return []byte("ok\n"), nil
	}
	b, _ := json.Marshal(f.nodes)
	return append([]byte("some warning\n"), b...), nil
}

func writeStatus(t *testing.T, dir string, st rayhead.Status) {
	t.Helper()
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, rayhead.StateFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDrain: the live Ray node named after the instance is drained with
// `ray drain-node` (reason preemption, the seconds left to the deadline,
// the Ray head's GCS address, the cluster's TLS env); it counts drained
// once that node ID is DEAD, not while ALIVE, and a new Ray of the same
// name does not make it alive again. No Ray head: ErrNoRay.
func TestDrain(t *testing.T) {
	dir := t.TempDir()
	f := &fakeRay{nodes: []Node{{NodeID: "old", State: "DEAD"}, {NodeID: "abc", State: "ALIVE"}}}
	d := &Drainer{StateDir: dir, Run: f.run}
	c := wire.Candidate{CandidateID: "c1", InstanceID: "i1"}
	if err := d.Drain(context.Background(), c, "down", time.Now().Add(time.Minute)); !errors.Is(err, reconcile.ErrNoRay) {
		t.Fatalf("no Ray head: %v; want ErrNoRay", err)
	}
	writeStatus(t, dir, rayhead.Status{State: rayhead.Running, Address: "10.0.0.1:6379", Python: "/ray/bin/python"})
	if err := d.Drain(context.Background(), c, "down", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if len(f.drains) != 1 {
		t.Fatalf("drains %v; want one", f.drains)
	}
	argv := strings.Join(f.drains[0], " ")
	for _, want := range []string{"/ray/bin/python -m ray.scripts.scripts drain-node", "--address 10.0.0.1:6379", "--node-id abc",
		"--reason DRAIN_NODE_REASON_PREEMPTION", "--deadline-remaining-seconds 60"} {
		if !strings.Contains(argv, want) {
			t.Errorf("argv %q lacks %q", argv, want)
		}
	}
	if env := strings.Join(f.envs[len(f.envs)-1], "\n"); !strings.Contains(env, "RAY_USE_TLS=1") || !strings.Contains(env, "RAY_USAGE_STATS_ENABLED=0") {
		t.Errorf("drain-node env lacks the cluster's TLS or usage stats off")
	}
	if done, err := d.Drained(context.Background(), c); err != nil || done {
		t.Errorf("node ALIVE: drained %v (%v); want false", done, err)
	}
	f.nodes = []Node{{NodeID: "abc", State: "DEAD"}, {NodeID: "new", State: "ALIVE"}}
	if done, err := d.Drained(context.Background(), c); err != nil || !done {
		t.Errorf("node DEAD, a new Ray alive: drained %v (%v); want true", done, err)
	}
	f.nodes = []Node{{NodeID: "old", State: "DEAD"}}
	if err := d.Drain(context.Background(), wire.Candidate{CandidateID: "c2", InstanceID: "i2"}, "down", time.Now().Add(time.Minute)); err == nil || errors.Is(err, reconcile.ErrNoRay) {
		t.Errorf("no live node: %v; want an error (the loop ends it at the deadline)", err)
	}
}
