// Package raydrain is the reconcile loop's Drainer on the Ray head `head
// up` runs: it finds a node's Ray by its node name (the instance ID the
// enroll bundle gives `ray start --node-name`), asks Ray to drain it with
// `ray drain-node` (reason preemption, a deadline), and reads the node's
// state from the Ray head's state API until Ray shows it no longer alive
// (a draining raylet exits once idle). It runs the Ray head's own Python
// with the cluster's TLS and token files, as `head run` does.
package raydrain

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/internal/wire"
)

//go:embed nodes.py
var nodesPy string

// Runner runs argv with env and returns its combined output.
type Runner func(ctx context.Context, argv, env []string) ([]byte, error)

// Drainer drains nodes on the Ray head of a state dir.
type Drainer struct {
	StateDir string
	Run      Runner // nil: exec with a 60 s bound
	mu       sync.Mutex
	ids      map[string]string // candidate → the Ray node ID drained
}

// New returns a Drainer for the Ray head head up runs in stateDir.
func New(stateDir string) *Drainer { return &Drainer{StateDir: stateDir} }

var _ reconcile.Drainer = (*Drainer)(nil)

// Node is one Ray node as nodes.py prints it.
type Node struct {
	NodeID string `json:"node_id"`
	State  string `json:"state"`
}

// Drain implements reconcile.Drainer.
func (d *Drainer) Drain(ctx context.Context, c wire.Candidate, why string, deadline time.Time) error {
	python, env, st, err := d.env()
	if err != nil {
		return err
	}
	nodes, err := d.nodes(ctx, python, env, c.InstanceID)
	if err != nil {
		return err
	}
	id := ""
	for _, n := range nodes {
		if n.State == "ALIVE" {
			id = n.NodeID
		}
	}
	if id == "" {
		return fmt.Errorf("no live Ray node named %s (%d listed)", c.InstanceID, len(nodes))
	}
	secs := max(int(math.Ceil(time.Until(deadline).Seconds())), 1)
	argv := DrainArgv(python, st.Address, id, "rayvast: "+why+" of candidate "+c.CandidateID, secs)
	if out, err := d.run(ctx, argv, env); err != nil {
		return fmt.Errorf("ray drain-node %s: %v: %s", id, err, lastLine(out))
	}
	d.mu.Lock()
	if d.ids == nil {
		d.ids = map[string]string{}
	}
	d.ids[c.CandidateID] = id
	d.mu.Unlock()
	return nil
}

// Drained implements reconcile.Drainer: the node drained is no longer
// ALIVE (DEAD, or gone from the list). A Ray the agent started anew on
// the node has another node ID and does not count.
func (d *Drainer) Drained(ctx context.Context, c wire.Candidate) (bool, error) {
	d.mu.Lock()
	id := d.ids[c.CandidateID]
	d.mu.Unlock()
	if id == "" {
		return false, errors.New("not drained by this head")
	}
	python, env, _, err := d.env()
	if err != nil {
		return false, err
	}
	nodes, err := d.nodes(ctx, python, env, c.InstanceID)
	if err != nil {
		return false, err
	}
	for _, n := range nodes {
		if n.NodeID == id {
			return n.State != "ALIVE", nil
		}
	}
	return true, nil
}

// DrainArgv is `ray drain-node` for node id (hex) on the GCS at address:
// reason preemption, the node ended in secs seconds.
func DrainArgv(python, address, id, message string, secs int) []string {
	return []string{python, "-m", "ray.scripts.scripts", "drain-node", "--address", address, "--node-id", id,
		"--reason", "DRAIN_NODE_REASON_PREEMPTION", "--reason-message", message,
		"--deadline-remaining-seconds", strconv.Itoa(secs)}
}

// env is the Ray head's Python, the client env of its cluster and its
// status. ErrNoRay when head up runs no Ray head in the state dir.
func (d *Drainer) env() (string, []string, rayhead.Status, error) {
	st, ok, err := rayhead.ReadStatus(d.StateDir)
	if err != nil {
		return "", nil, st, err
	}
	if !ok || st.Python == "" {
		return "", nil, st, reconcile.ErrNoRay
	}
	if st.State != rayhead.Running {
		return "", nil, st, fmt.Errorf("the Ray head is %s", st.State)
	}
	f := rayhead.FilesIn(filepath.Join(d.StateDir, rayhead.FilesDir))
	dash := st.Dashboard
	if dash == "" {
		dash = rayhead.Dashboard
	}
	return st.Python, rayhead.ClientEnv(os.Environ(), f, st.Address, dash, st.Python), st, nil
}

// nodes lists the Ray nodes named name.
func (d *Drainer) nodes(ctx context.Context, python string, env []string, name string) ([]Node, error) {
	out, err := d.run(ctx, []string{python, "-c", nodesPy, name}, env)
	if err != nil {
		return nil, fmt.Errorf("list Ray nodes: %v: %s", err, lastLine(out))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var nodes []Node
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &nodes); err != nil {
		return nil, fmt.Errorf("list Ray nodes: %v: %s", err, lastLine(out))
	}
	return nodes, nil
}

func (d *Drainer) run(ctx context.Context, argv, env []string) ([]byte, error) {
	if d.Run != nil {
		return d.Run(ctx, argv, env)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	return cmd.CombinedOutput()
}

// lastLine is the last non-empty line of out, cut to 300 bytes: Ray's
// reason, for the log (the env, token file path only, is never printed).
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	l := lines[len(lines)-1]
	if len(l) > 300 {
		l = l[:300]
	}
	return l
}
