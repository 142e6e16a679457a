package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestDrainNewest and TestDrainOldest (issue 43, planned ends become
// drains), with real Ray: a task runs on the one node, pinned there, when `head down` ends
// the cluster. The head drains the node in Ray first (reason preemption),
// keeps its rental while the task runs, and ends the node only once Ray
// shows it drained: the task finishes and its result reaches the driver,
// Ray's drain came after the task started and the node's end after the
// task finished, and the end was not forced by the deadline. The task on
// the node sees its node among Ray's draining nodes with the deadline
// (what Ray Train 2.60's get_preemption_info() polls), and the node's
// agent, told of the drain, does not start Ray again once it exits: Ray
// knows no other node at its IP afterwards.
func TestDrainNewest(t *testing.T) { drainBeforeEnd(t, rvtest.RayNewest) }
func TestDrainOldest(t *testing.T) { drainBeforeEnd(t, rvtest.RayOldest) }

func drainBeforeEnd(t *testing.T, version string) {
	c := startRayCluster(t, version, 1)
	node := c.waitRunning(1, 5*time.Minute)[0]
	// The node's agent log (its container's), followed until the container is removed.
	agentLog := &rvtest.Buffer{}
	follow := exec.Command("docker", "logs", "-f", node.InstanceID)
	follow.Stdout, follow.Stderr = agentLog, agentLog
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan struct{})
	go func() { _ = follow.Wait(); close(followed) }()
	defer func() { _ = follow.Process.Kill(); <-followed }()

	script := filepath.Join(t.TempDir(), "drain.py")
	if err := os.WriteFile(script, []byte(drainScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	drv := exec.CommandContext(ctx, suite.head, "run", "--state", c.state, "--", "python", script, node.PublicIP, "25")
	out, err := drv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	drv.Stderr = drv.Stdout
	if err := drv.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	var log []string
	next := func(prefix string, limit time.Duration) string {
		timer := time.After(limit)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the driver ended before %s:\n%s", prefix, strings.Join(log, "\n"))
				}
				log = append(log, l)
				if rest, ok := strings.CutPrefix(l, prefix); ok {
					return rest
				}
			case <-timer:
				t.Fatalf("no %s from the driver in %s:\n%s", prefix, limit, strings.Join(log, "\n"))
			}
		}
	}
	next("TASK-STARTED", 3*time.Minute)
	downAt := time.Now()
	down, err := exec.CommandContext(ctx, suite.head, "down", "--config", c.cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("head down: %v\n%s", err, down)
	}
	downTook := time.Since(downAt)
	var res struct {
		Start, End float64
		Draining   *struct {
			DeadlineMS float64 `json:"deadline_ms"`
			At         float64 `json:"at"`
		} `json:"draining"`
		DrainingErr string `json:"draining_err"`
	}
	if err := json.Unmarshal([]byte(next("TASK-DONE ", time.Minute)), &res); err != nil {
		t.Fatalf("the task's result: %v\n%s", err, strings.Join(log, "\n"))
	}
	var after []struct {
		ID    string `json:"id"`
		Alive bool   `json:"alive"`
	}
	if err := json.Unmarshal([]byte(next("NODES-AFTER ", time.Minute)), &after); err != nil {
		t.Fatalf("the Ray nodes after: %v\n%s", err, strings.Join(log, "\n"))
	}
	_ = drv.Wait()
	// No Ray came back on the node after its drain: Ray knows one node at
	// its IP, the drained one, and it is dead.
	t.Logf("Ray nodes at the node's IP 10 s after the task: %+v", after)
	if len(after) != 1 || after[0].Alive {
		t.Errorf("Ray nodes at the node's IP after the drain: %+v; want the drained one only, dead", after)
	}
	cand, err := c.admin.Candidate(context.Background(), node.CandidateID)
	if err != nil {
		t.Fatal(err)
	}
	taskEnd := time.Unix(0, int64(res.End*1e9))
	t.Logf("task ran %.1f s to %.1f s after head down began; node ended (%s, %s) %.1f s after; head down took %s",
		res.Start-float64(downAt.UnixNano())/1e9, taskEnd.Sub(downAt).Seconds(), cand.State, cand.Reason,
		cand.UpdatedAt.Sub(downAt).Seconds(), downTook.Round(100*time.Millisecond))
	if cand.State != wire.StateEnded || !cand.UpdatedAt.After(taskEnd) {
		t.Errorf("the node's candidate: %s at %s; want ended after the task ended (%s)", cand.State, cand.UpdatedAt, taskEnd)
	}
	// The task on the drained node saw its node draining, with the head's
	// deadline (about DefaultDrainDeadline after head down), in what Ray
	// Train's get_preemption_info() reads on 2.60.
	if d := res.Draining; d == nil {
		t.Errorf("the task never saw its node among Ray's draining nodes (err %q)", res.DrainingErr)
	} else {
		deadline := time.UnixMilli(int64(d.DeadlineMS))
		t.Logf("the task saw its node draining %.1f s after head down began, deadline %.1f s after", d.At-float64(downAt.UnixNano())/1e9, deadline.Sub(downAt).Seconds())
		if off := deadline.Sub(downAt) - reconcile.DefaultDrainDeadline; off < -10*time.Second || off > 30*time.Second {
			t.Errorf("Ray's drain deadline %s is %s off head down + %s", deadline, off, reconcile.DefaultDrainDeadline)
		}
	}
	headLog := c.out.String()
	if b, err := os.ReadFile(filepath.Join(c.state, "head.log")); err == nil {
		headLog += string(b)
	}
	// The agent heard of the drain in a heartbeat answer (protocol history
	// 29) and did not start Ray again after it, up to its container's end.
	select {
	case <-followed:
	case <-time.After(20 * time.Second):
		t.Log("the node's container still runs 20 s after its end")
	}
	al := agentLog.String()
	iTold := strings.Index(al, "the head drains this node before ending it")
	iHeld := strings.Index(al, "ray exited after the head drained this node: not starting it again")
	t.Logf("agent: told of the drain at byte %d, held Ray after its exit at %d (-1: the container was removed first)", iTold, iHeld)
	if iTold >= 0 {
		t.Logf("the agent's log from the drain on:\n%s", lastLines(al[iTold:], 12))
	}
	if iTold < 0 {
		t.Errorf("the node's agent never heard of the drain:\n%s", lastLines(al, 40))
	} else if after := al[iTold:]; strings.Contains(after, "ray restarted") || strings.Contains(after, "starting ray") {
		t.Errorf("the node's agent started Ray again after the drain:\n%s", lastLines(al, 40))
	}
	if strings.Contains(headLog, "event=ray_restarted") {
		t.Errorf("the node reported a restart of its Ray:\n%s", lastLines(headLog, 40))
	}
	iDrain := strings.Index(headLog, "draining the node in Ray before its rental ends")
	iDone := strings.Index(headLog, "Ray drained the node; ending it")
	if iDrain < 0 || iDone < iDrain || strings.Contains(headLog, "drain's deadline passed") || strings.Contains(headLog, "Ray did not take the drain") {
		t.Errorf("the head's log: drain asked at %d, drained at %d; want both, in that order, and no deadline end:\n%s", iDrain, iDone, lastLines(headLog, 40))
	}
}

// drainScript starts a task pinned to the node at argv[1] that sleeps
// argv[2] s, says when it runs, and prints its result once fetched.
const drainScript = `
import json, sys, time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ip, task_s = sys.argv[1], float(sys.argv[2])
ray.init(logging_level="ERROR")
node = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == ip and "node:__internal_head__" not in n["Resources"]][0]

@ray.remote(num_cpus=0)
class Flag:
    def __init__(self):
        self.up = False
    def set(self):
        self.up = True
    def get(self):
        return self.up

@ray.remote(num_cpus=1)
def work(s, flag):
    ray.get(flag.set.remote())
    t0 = time.time()
    me = ray.get_runtime_context().get_node_id()
    # What Ray Train 2.60's PreemptionWatcher polls for get_preemption_info():
    # Ray Core's draining nodes, {node_id_hex: deadline_ms}.
    seen, err = None, ""
    while time.time() < t0 + s:
        if seen is None:
            try:
                d = ray._private.state.state.get_draining_nodes()
                if me in d:
                    seen = {"deadline_ms": d[me], "at": time.time()}
            except Exception as e:
                err = repr(e)[:200]
        time.sleep(0.5)
    return {"start": t0, "end": time.time(), "draining": seen, "draining_err": err}

head = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "node:__internal_head__" in n["Resources"]][0]
flag = Flag.options(scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False)).remote()
ref = work.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(task_s, flag)
while not ray.get(flag.get.remote()):
    time.sleep(0.2)
print("TASK-STARTED", flush=True)
print("TASK-DONE " + json.dumps(ray.get(ref, timeout=300)), flush=True)
# Ten seconds on (the node's rental ends meanwhile), every Ray node Ray has
# known at the node's IP: the drained one, and any Ray started there since.
time.sleep(10)
print("NODES-AFTER " + json.dumps([{"id": n["NodeID"], "alive": n["Alive"]} for n in ray.nodes() if n["NodeManagerAddress"] == ip]), flush=True)
`
