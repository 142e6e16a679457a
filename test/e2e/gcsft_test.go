package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/listenports"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// Issue 43: the Ray head's GCS keeps the cluster in a store on the head's
// machine (RocksDB on Ray 2.60, Redis owned by head up on 2.52), so a GCS
// that dies takes nothing on the nodes with it.

// ftTaskS is how long the task that runs across the GCS's death sleeps: it
// must outlast the Ray head's restart (about 10 s).
const ftTaskS = 25

func TestGCSFaultToleranceNewest(t *testing.T) { gcsFaultTolerance(t, rvtest.RayNewest) }
func TestGCSFaultToleranceOldest(t *testing.T) { gcsFaultTolerance(t, rvtest.RayOldest) }

// gcsFaultTolerance, with real Ray: a detached actor on one node holds a
// count and has started a task on the other node; gcs_server is killed
// with SIGKILL (the Ray head restarts, its GCS on the same address and
// port with the store it left). Then (1) tasks run on both nodes again
// (how soon is a figure against recoverTarget; past recoverLimit it
// fails); (2) the actor answers from the same process with the count it
// had, and counts on; (3) the task that ran while the GCS was dead
// finished and its result is fetched through the actor, its owner; (4)
// neither agent restarted Ray (the head named the same Ray head
// throughout); (5) on Ray 2.52 Redis's password is in no log of the
// state dir or of Ray, in no env of the Ray head's processes or of the
// actor, in no output of head up and in no `head status`.
func gcsFaultTolerance(t *testing.T, version string) {
	c := startRayCluster(t, version, 2)
	nodes := c.waitRunning(2, 5*time.Minute)
	ips := []string{nodes[0].PublicIP, nodes[1].PublicIP}
	before, _, _ := rayhead.ReadStatus(c.state)
	wantStore := rayhead.StoreRedis
	if rayhead.UsesRocksDB(version) {
		wantStore = rayhead.StoreRocksDB
	}
	if !strings.HasPrefix(before.Store, wantStore) {
		t.Fatalf("Ray %s: the Ray head's store is %q, want %s", version, before.Store, wantStore)
	}

	setup := c.ftDriver(t, "setup", ips)
	t.Logf("detached actor set up: %s", setup)
	killed := time.Now()
	killHeadGCS(t, c.state)
	up := waitHeadBack(t, c.state, before)
	t.Logf("GCS killed → the Ray head running again: %s", up.Round(100*time.Millisecond))

	tasks := c.probe(t, "tasks", 2, 2*time.Minute)
	done := map[string]float64{}
	for len(done) < 2 {
		ev, ok := tasks.next(2*time.Minute, "task")
		if !ok {
			t.Fatalf("tasks on both nodes after the GCS's kill: only %v:\n%s", done, tasks.output())
		}
		done[ev.IP] = ev.T - float64(killed.UnixNano())/1e9
	}
	tasks.stop()
	worst := 0.0
	for ip, s := range done {
		t.Logf("GCS killed → a task ran on node %s: %.1f s", ip, s)
		worst = math.Max(worst, s)
	}
	t.Logf("the driver's events, seconds after the kill:\n%s", tasks.timeline(killed))
	checkRecovery(t, fmt.Sprintf("(GCS store) Ray %s: GCS killed → tasks on both nodes again", version), worst)

	after := c.ftDriver(t, "check", ips)
	var s0, s1 ftState
	if err := json.Unmarshal([]byte(setup), &s0); err != nil {
		t.Fatalf("setup's answer %q: %v", setup, err)
	}
	if err := json.Unmarshal([]byte(after), &s1); err != nil {
		t.Fatalf("check's answer %q: %v", after, err)
	}
	if s1.PID != s0.PID || s1.Node != s0.Node {
		t.Errorf("the detached actor is another one after the GCS's kill: before pid %d on %s, after pid %d on %s", s0.PID, s0.Node, s1.PID, s1.Node)
	}
	if s0.Count != 3 || s1.Count != 4 {
		t.Errorf("the detached actor's count: %d before the kill, %d after one more, want 3 then 4", s0.Count, s1.Count)
	}
	kill := float64(killed.UnixNano()) / 1e9
	switch {
	case s1.Task.Node == "" || s1.Task.Node == s0.Node:
		t.Errorf("the task's result %+v: not from the other node (actor on %s)", s1.Task, s0.Node)
	case !(s1.Task.Start < kill && s1.Task.End > kill):
		t.Errorf("the task did not run across the GCS's death: ran %.1f s to %.1f s after the kill", s1.Task.Start-kill, s1.Task.End-kill)
	default:
		t.Logf("the task ran from %.1f s to %.1f s around the kill; its result fetched: %+v", s1.Task.Start-kill, s1.Task.End-kill, s1.Task)
	}

	checkPlacementGroup(t, s0, s1)

	st, _, _ := rayhead.ReadStatus(c.state)
	if st.Restarts <= before.Restarts || st.ID != before.ID {
		t.Errorf("the Ray head: restarts %d → %d, ID %s → %s; want one restart more and the same ID (the same cluster)", before.Restarts, st.Restarts, before.ID, st.ID)
	}
	for _, n := range c.nodes() {
		if n.Ray.Restarts != 0 {
			t.Errorf("node %s: its agent restarted Ray %d times while the GCS only restarted", n.InstanceID, n.Ray.Restarts)
		}
	}

	if wantStore == rayhead.StoreRedis {
		checkRedisPassword(t, c, s1.Env)
	}
}

// checkPlacementGroup: the placement group made before the kill is the
// same one after it (same ID, CREATED), its bundles on the same two
// distinct nodes, and a task in each bundle ran on its bundle's node.
func checkPlacementGroup(t *testing.T, s0, s1 ftState) {
	t.Helper()
	b, a := s0.PG, s1.PG
	switch {
	case len(b.Nodes) != 2 || b.Nodes[0] == b.Nodes[1]:
		t.Errorf("the placement group before the kill: bundles on %v, want two distinct nodes", b.Nodes)
	case a.ID != b.ID || a.State != "CREATED":
		t.Errorf("the placement group after the kill: %s %s, want %s CREATED (the same one)", a.ID, a.State, b.ID)
	case strings.Join(a.Nodes, ",") != strings.Join(b.Nodes, ","):
		t.Errorf("the placement group's bundles moved: %v before the kill, %v after", b.Nodes, a.Nodes)
	case strings.Join(a.Ran, ",") != strings.Join(a.Nodes, ","):
		t.Errorf("tasks in the placement group's bundles ran on %v, want its bundles' nodes %v", a.Ran, a.Nodes)
	default:
		t.Logf("the placement group %s survived the kill: bundles on %v, a task ran in each", a.ID, a.Nodes)
	}
}

// waitHeadBack waits until the Ray head that ran as before restarted and
// runs again, and returns how long after the call that was. A driver on
// the head's machine must not connect sooner: while the GCS lists no raylet
// of this machine Ray's driver takes another node's raylet socket, a path
// on that node, and aborts (seen with 2.60: raylet_ipc_client.cc "Failed
// to connect to socket").
func waitHeadBack(t *testing.T, state string, before rayhead.Status) time.Duration {
	t.Helper()
	start := time.Now()
	waitFor(t, 2*time.Minute, "the Ray head restarted and running", func() (bool, string) {
		st, ok, _ := rayhead.ReadStatus(state)
		return ok && st.Restarts > before.Restarts && st.State == rayhead.Running, fmt.Sprintf("%s, %d restarts", st.State, st.Restarts)
	})
	return time.Since(start)
}

// ftState is what ftScript prints.
type ftState struct {
	PID   int    `json:"pid"`
	Node  string `json:"node"`
	Count int    `json:"count"`
	Env   string `json:"env"` // the actor's environment, one variable a line
	Task  struct {
		Node  string  `json:"node"`
		Start float64 `json:"start"`
		End   float64 `json:"end"`
	} `json:"task"`
	// PG is the detached placement group with a bundle on each node.
	PG struct {
		ID    string   `json:"id"`
		State string   `json:"state"`
		Nodes []string `json:"nodes"` // its bundles' nodes, sorted
		Ran   []string `json:"ran"`   // where a task in each bundle ran (check), sorted
	} `json:"pg"`
}

// ftScript: "setup" makes the detached actor on the first node, counts to
// 3, starts the long task on the second node through the actor and waits
// until that task runs, and makes a detached placement group with a
// bundle on each node; "check" finds the actor by name, counts once more
// and fetches the task's result through it, and finds the placement group
// by name and runs a task in each of its bundles.
const ftScript = `
import json, os, sys, time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy
from ray.util.placement_group import placement_group, placement_group_table

mode, ips, task_s = sys.argv[1], sys.argv[2].split(","), float(sys.argv[3])
deadline = time.time() + 120
while True:
    try:
        ray.init(namespace="rv-ft", logging_level="ERROR")
        break
    except Exception:
        if time.time() > deadline:
            raise
        time.sleep(0.5)

def node_of(ip):
    for n in ray.nodes():
        if n["Alive"] and n["NodeManagerAddress"] == ip and "node:__internal_head__" not in n["Resources"]:
            return n["NodeID"]
    raise SystemExit("no alive node " + ip)

@ray.remote(num_cpus=0)
def long_task(s, started):
    ray.get(started.mark.remote())
    t0 = time.time()
    time.sleep(s)
    return {"node": ray.get_runtime_context().get_node_id(), "start": t0, "end": time.time()}

@ray.remote(num_cpus=0)
class Keeper:
    def __init__(self):
        self.count, self.ref, self.began = 0, None, False
    def add(self):
        self.count += 1
        return self.count
    def start(self, node, s):
        me = ray.get_runtime_context().current_actor
        self.ref = long_task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(s, me)
    def mark(self):
        self.began = True
    def began_yet(self):
        return self.began
    def state(self):
        env = "\n".join(k + "=" + v for k, v in sorted(os.environ.items()))
        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(), "count": self.count, "env": env}
    def result(self):
        return ray.get(self.ref, timeout=120)

@ray.remote(num_cpus=0.1)
def where():
    return ray.get_runtime_context().get_node_id()

def pg_state(pg, run):
    tab = placement_group_table(pg)
    st = {"id": pg.id.hex(), "state": tab["state"], "nodes": sorted(tab["bundles_to_node_id"].values())}
    if run:
        st["ran"] = sorted(ray.get([where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)).remote()
            for i in range(2)], timeout=120))
    return st

if mode == "setup":
    k = Keeper.options(name="keeper", lifetime="detached",
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_of(ips[0]), soft=False)).remote()
    for _ in range(3):
        ray.get(k.add.remote())
    ray.get(k.start.remote(node_of(ips[1]), task_s))
    while not ray.get(k.began_yet.remote()):
        time.sleep(0.1)
    out = ray.get(k.state.remote())
    pg = placement_group([{"CPU": 0.1}, {"CPU": 0.1}], strategy="STRICT_SPREAD", name="rv-ft-pg", lifetime="detached")
    ray.get(pg.ready(), timeout=120)
    out["pg"] = pg_state(pg, False)
elif mode == "lost":
    out = {}
    for what, get in (("actor", lambda: ray.get_actor("keeper")), ("pg", lambda: ray.util.get_placement_group("rv-ft-pg"))):
        try:
            get()
            out[what] = True
        except ValueError:
            out[what] = False
else:
    k = ray.get_actor("keeper")
    ray.get(k.add.remote())
    out = ray.get(k.state.remote())
    out["task"] = ray.get(k.result.remote())
    pg = ray.util.get_placement_group("rv-ft-pg")
    ray.get(pg.ready(), timeout=120)
    out["pg"] = pg_state(pg, True)
print("FT-STATE " + json.dumps(out), flush=True)
`

// ftDriver runs ftScript in mode through `head run` and returns its state line.
func (c *rayCluster) ftDriver(t *testing.T, mode string, ips []string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "ft.py")
	if err := os.WriteFile(script, []byte(ftScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(suite.head, "run", "--state", c.state, "--", "python", script, mode, strings.Join(ips, ","), fmt.Sprint(ftTaskS))
	timer := time.AfterFunc(4*time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, "FT-STATE "); ok {
			return rest
		}
	}
	t.Fatalf("the %s driver: %v\n%s", mode, err, lastLines(string(out), 40))
	return ""
}

// checkRedisPassword looks for Redis's password where it must not be.
func checkRedisPassword(t *testing.T, c *rayCluster, actorEnv string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.state, rayhead.StoreDir, "redis.password"))
	if err != nil {
		t.Fatal(err)
	}
	pw := strings.TrimSpace(string(b))
	if len(pw) < 32 {
		t.Fatalf("Redis's password %d characters, want ≥ 32", len(pw))
	}
	if fi, _ := os.Stat(filepath.Join(c.state, rayhead.StoreDir, "redis.password")); fi.Mode().Perm() != 0o600 {
		t.Errorf("Redis's password file: mode %o, want 600", fi.Mode().Perm())
	}
	found := func(where string, data []byte) {
		if bytes.Contains(data, []byte(pw)) {
			t.Errorf("Redis's password is in %s", where)
		}
	}
	found("head up's output", []byte(c.out.String()))
	found("the detached actor's environment", []byte(actorEnv))
	status, err := exec.Command(suite.head, "status", "--state", c.state).CombinedOutput()
	if err != nil {
		t.Errorf("head status: %v\n%s", err, status)
	}
	found("head status", status)
	if !bytes.Contains(status, []byte("GCS store: redis at 127.0.0.1:")) {
		t.Errorf("head status does not name the store:\n%s", status)
	}
	// Every log and file of the state dir but the password file and
	// Redis's config (which must hold it), and every file of the Ray head's
	// temp dir (its session logs).
	logs := 0
	for _, root := range []string{c.state, rayhead.TempDir(c.state)} {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Type()&fs.ModeType != 0 {
				return nil
			}
			base := filepath.Base(path)
			if base == "redis.password" || base == "redis.conf" || strings.HasPrefix(path, filepath.Join(c.state, rayhead.StoreDir, rayhead.StoreRedis)) {
				return nil
			}
			data, err := os.ReadFile(path)
			if err == nil {
				logs++
				found(path, data)
			}
			return nil
		})
	}
	// The environment of each process of the Ray head (GCS, raylet,
	// dashboard, workers).
	st, _, _ := rayhead.ReadStatus(c.state)
	tree, err := listenports.Tree("/", st.PID)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range tree {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil {
			found(fmt.Sprintf("the environment of the Ray head's process %d", pid), env)
		}
	}
	t.Logf("Redis's password looked for in %d files, %d processes' environments, head up's output and head status", logs, len(tree))
}
