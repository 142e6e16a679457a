package demo

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ClusterJob is the Ray job that proves the cluster: a task on each worker
// node, a 20 MiB object made on one worker and read on another. The demo
// runs it through `head run`; the end-to-end tests run the same file.
//
//go:embed clusterjob.py
var ClusterJob []byte

// JobResult is clusterjob.py's one JSON line.
type JobResult struct {
	RayVersion string     `json:"ray_version"`
	ConnectS   float64    `json:"connect_s"`
	OK         bool       `json:"ok"`
	Error      string     `json:"error"`
	Nodes      []JobNode  `json:"nodes"`
	Object     *JobObject `json:"object"`
}

// JobNode is one worker node's first task.
type JobNode struct {
	IP           string  `json:"ip"`
	NodeName     string  `json:"node_name"`
	FirstTaskS   float64 `json:"first_task_s"`
	StartedS     float64 `json:"started_after_s"`
	RanOnTheNode bool    `json:"ran_on_this_node"`
	// Labels are the node's labels as Ray has them (its own ray.io/ ones
	// left out): the node type's, from the agent's --labels.
	Labels map[string]string `json:"labels"`
	Error  string            `json:"error"`
}

// JobObject is the object moved between two worker nodes.
type JobObject struct {
	From   string  `json:"from"`
	To     string  `json:"to"`
	Bytes  int     `json:"bytes"`
	Intact bool    `json:"intact"`
	FetchS float64 `json:"fetch_s"`
	Error  string  `json:"error"`
}

// ParseJobOutput finds clusterjob.py's result line in its output.
func ParseJobOutput(out string) (JobResult, bool) {
	var res JobResult
	found := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, `{"ray_version"`) {
			found = json.Unmarshal([]byte(l), &res) == nil
		}
	}
	return res, found
}

// runJob runs the cluster job from this machine with the cluster's env
// (`head run`), prints what ran where, and reports whether all of it worked.
func (d *demo) runJob(ctx context.Context, nodes int) bool {
	script := filepath.Join(d.workDir, "clusterjob.py")
	if err := os.WriteFile(script, ClusterJob, 0o644); err != nil {
		d.say("Ray job: %v", err)
		return false
	}
	d.say("\nRay job from this machine (%s run --state %s -- python clusterjob.py): a task on each node, an object node to node",
		d.exe, d.stateDir)
	jctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	// The nodes may still be joining Ray: wait for them as long as for the
	// candidates (--timeout), at most 3 minutes.
	wait := min(d.o.timeout, 3*time.Minute)
	out, _ := exec.CommandContext(jctx, d.exe, "run", "--state", d.stateDir, "--", "python", script,
		"--nodes", fmt.Sprint(nodes), "--wait", fmt.Sprint(int(wait.Seconds()))).CombinedOutput()
	res, found := ParseJobOutput(string(out))
	if !found {
		d.say("  the job printed no result after %s; its last lines:", time.Since(t0).Round(100*time.Millisecond))
		d.sayTail(string(out), 12)
		return false
	}
	d.say("  Ray %s, driver connected in %.1f s", res.RayVersion, res.ConnectS)
	if res.Error != "" {
		d.say("  %s", res.Error)
	}
	for _, n := range res.Nodes {
		if n.Error != "" {
			d.say("  node %s: task failed: %s", n.IP, n.Error)
			continue
		}
		where := "ran there"
		if !n.RanOnTheNode {
			where = "ran ELSEWHERE"
		}
		d.say("  node %s (%s): first task %s, %.1f s after it was sent", n.IP, n.NodeName, where, n.FirstTaskS)
	}
	if o := res.Object; o != nil {
		if o.Error != "" {
			d.say("  object between nodes: %s", o.Error)
		} else {
			state := "intact"
			if !o.Intact {
				state = "CORRUPTED"
			}
			d.say("  %d MiB object made on %s, read on %s through vast's NAT: %s, fetched in %.2f s", o.Bytes>>20, o.From, o.To, state, o.FetchS)
		}
	}
	if !res.OK {
		d.sayTail(string(out), 12)
	}
	return res.OK
}

func (d *demo) sayTail(out string, n int) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for _, l := range lines {
		d.say("    %s", l)
	}
}
