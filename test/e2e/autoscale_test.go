package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// autoscaleIdleMinutes is the cluster's autoscaler idle_timeout_minutes:
// short, so the test sees Ray end idle nodes.
const autoscaleIdleMinutes = 0.5

// autoscaleDriver is the demand: two tasks that each need a whole node of
// the autoscaled type (1 CPU and its one "autoscale-slot"), held until both
// run at once (a barrier actor on the Ray head), so Ray must scale 0 → 2.
// It prints the times the test measures from, on this machine's clock
// (the containers share it).
const autoscaleDriver = `
import json, sys, time
import ray

want, timeout = int(sys.argv[1]), float(sys.argv[2])
ray.init(log_to_driver=False)

@ray.remote(num_cpus=0)
class Barrier:
    def __init__(self):
        self.ips = set()
    def arrive(self, ip):
        self.ips.add(ip)
    def count(self):
        return len(self.ips)

@ray.remote(num_cpus=1, resources={"autoscale-slot": 1})
def work(barrier, want, timeout):
    started = time.time()
    ip = ray.util.get_node_ip_address()
    ray.get(barrier.arrive.remote(ip))
    while ray.get(barrier.count.remote()) < want and time.time() < started + timeout:
        time.sleep(0.2)
    return {"ip": ip, "started": started, "together": ray.get(barrier.count.remote()) >= want}

barrier = Barrier.remote()
ray.get(barrier.count.remote())
demand = time.time()
results = ray.get([work.remote(barrier, want, timeout) for _ in range(want)])
print("AUTOSCALE " + json.dumps({"demand": demand, "done": time.time(), "tasks": results}), flush=True)
`

type autoscaleResult struct {
	Demand float64 `json:"demand"`
	Done   float64 `json:"done"`
	Tasks  []struct {
		IP       string  `json:"ip"`
		Started  float64 `json:"started"`
		Together bool    `json:"together"`
	} `json:"tasks"`
}

// TestAutoscaleRealRay is issue 23's proof on the Docker provider with
// real Ray: `head up` with the config's autoscaler block starts the Ray
// head with Ray's autoscaler and the plugin; with min_workers 0 nothing is
// rented until a driver's tasks need two nodes of the type; Ray's
// autoscaler then creates two candidates through the plugin, the head
// rents them, they enroll and run the tasks at once (0 → 2); once idle past
// the timeout Ray terminates both and the rentals end, no container left
// (2 → 0). It logs the two figures docs/figures.md gives: demand → both tasks
// running, and idle → every rental ended.
func TestAutoscaleRealRay(t *testing.T) {
	autoscale(t)
}

// TestAutoscaleRealRayV2 is the same with Ray's v2 autoscaler
// (RAY_enable_autoscaler_v2=1 in head up's environment, which the Ray head
// inherits): Ray issue #57153 says v2 does not officially support external
// providers; this is what Ray 2.60's v2 does with the plugin.
func TestAutoscaleRealRayV2(t *testing.T) {
	t.Setenv("RAY_enable_autoscaler_v2", "1")
	autoscale(t)
}

func autoscale(t *testing.T) {
	// Ray's GCS listens on every address: a second Ray head at :6379 on
	// this machine (another test's) would take our nodes' connections. A
	// port from the ephemeral range: Ray refuses a GCS port inside its
	// worker ports (10002-19999).
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	gcsPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := startRayClusterEdit(t, rvtest.RayNewest, 0, 2, func(cfg map[string]any) {
		ray := cfg["ray"].(map[string]any)
		host, _, _ := net.SplitHostPort(ray["head_address"].(string))
		ray["head_address"] = net.JoinHostPort(host, strconv.Itoa(gcsPort))
		cfg["autoscaler"] = map[string]any{"idle_timeout_minutes": autoscaleIdleMinutes}
		// The suite's 2 s heartbeats call nodes lost (6 s) on a machine
		// loaded by other tests' Ray; Ray's own pace is what is measured.
		cfg["heartbeat_interval_s"] = 10
		nt := cfg["node_types"].(map[string]any)[safeType].(map[string]any)
		nt["cpus"] = 1 // Ray's autoscaler plans with the type's declared CPU
		nt["resources"] = map[string]any{"autoscale-slot": 1}
	},
		// Ports A and B off 8443/8444: another test's head firewall on this
		// machine drops those ports for every address but its own nodes'.
		"--listen-a", ":0", "--listen-b", ":0")
	waitFor(t, 3*time.Minute, "the Ray head with its autoscaler", func() (bool, string) {
		select {
		case err := <-c.done:
			t.Fatalf("head up exited early: %v\n%s", err, c.out.String())
		default:
		}
		// head up says the process runs; `ray start` says when Ray does.
		b, _ := os.ReadFile(filepath.Join(c.state, "ray-head.log"))
		up := strings.Contains(c.out.String(), "Ray autoscaler: on") && strings.Contains(string(b), "Ray runtime started")
		return up, "not yet"
	})
	defer func() {
		if t.Failed() {
			t.Logf("monitor.log (last 8 KiB):\n%s", lastBytes([]byte(monitorLog(c)), 8<<10))
		}
	}()
	if live := liveCands(t, c); len(live) != 0 {
		t.Fatalf("before any demand: %d live candidates, want 0 (min_workers 0; Ray owns the count)", len(live))
	}

	// 0 → 2: the driver's tasks are the demand.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	script := filepath.Join(t.TempDir(), "driver.py")
	if err := os.WriteFile(script, []byte(autoscaleDriver), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, suite.head, "run", "--state", c.state, "--", "python", script, "2", "480").CombinedOutput()
	res, ok := parseAutoscale(string(out))
	if err != nil || !ok {
		t.Fatalf("driver: %v\n%s", err, out)
	}
	ips := map[string]bool{}
	var last float64
	for _, task := range res.Tasks {
		ips[task.IP] = true
		last = max(last, task.Started)
		if !task.Together {
			t.Errorf("task on %s ran alone: the two nodes were never up at once", task.IP)
		}
	}
	live := liveCands(t, c)
	var candIPs []string
	for _, l := range live {
		candIPs = append(candIPs, l.PublicIP)
	}
	sort.Strings(candIPs)
	taskIPs := slices.Sorted(maps.Keys(ips))
	if len(live) != 2 || fmt.Sprint(candIPs) != fmt.Sprint(taskIPs) {
		t.Errorf("tasks ran on %v; live candidates' public IPs %v: want the same two", taskIPs, candIPs)
	}
	demandToRunning := seconds(last - res.Demand)
	demand := time.Unix(0, int64(res.Demand*1e9))
	var created, enrolled time.Time
	for _, l := range live {
		created = maxTime(created, l.CreatedAt)
	}
	for _, n := range c.nodes() {
		enrolled = maxTime(enrolled, n.EnrolledAt)
	}

	// 2 → 0: idle past the timeout, Ray ends both, and every rental ends.
	done := time.Unix(0, int64(res.Done*1e9))
	var endedAt time.Time
	waitFor(t, time.Duration(autoscaleIdleMinutes*float64(time.Minute))+4*time.Minute, "Ray to end both idle nodes and their rentals", func() (bool, string) {
		n := len(liveCands(t, c))
		cs, err := suite.eng.ListContainers(context.Background(), vastnet.LabelCluster+"="+c.name)
		if err != nil {
			return false, err.Error()
		}
		endedAt = time.Now()
		return n == 0 && len(cs) == 0, fmt.Sprintf("%d live candidates, %d containers", n, len(cs))
	})
	idleToEnded := endedAt.Sub(done)
	var terminated time.Time
	for _, l := range live {
		got := candidate(t, c, l.CandidateID)
		if got.State != wire.StateEnded || got.Reason != "deleted" {
			t.Errorf("candidate %s: %s %q, want ended by Ray's terminate (deleted)", l.CandidateID, got.State, got.Reason)
		}
		terminated = maxTime(terminated, got.UpdatedAt)
	}
	if n := len(allCands(t, c)); n != 2 {
		t.Errorf("%d candidates made in all, want 2", n)
	}
	mlog := monitorLog(c)
	if strings.Contains(mlog, "Error during autoscaling") {
		t.Errorf("monitor.log has an autoscaling error")
	}
	// Ray's autoscaler drains an idle node in the GCS before it calls the
	// plugin's terminate (v1: drain_nodes_via_gcs, v2: the Ray stopper,
	// reason idle termination); that finds the node by the plugin's
	// internal_ip, the node's public IP, which is Ray's node IP here. So
	// a scale-down is a drain without the head's (issue 43).
	if !autoscaleDrained(mlog) {
		t.Errorf("monitor.log shows no drain of the idle nodes before their end (v1: \"Draining N raylet(s).\", v2: \"Drained ray on … success=True\")")
	}
	t.Logf("AUTOSCALE demand → both tasks running on 2 new nodes: %s; idle → every rental ended: %s (idle timeout %s)",
		demandToRunning.Round(100*time.Millisecond), idleToEnded.Round(100*time.Millisecond),
		time.Duration(autoscaleIdleMinutes*float64(time.Minute)))
	t.Logf("AUTOSCALE from the demand: both candidates created %s, both enrolled %s, both tasks running %s; "+
		"from idle: Ray ended both candidates %s, no container left %s",
		created.Sub(demand).Round(100*time.Millisecond), enrolled.Sub(demand).Round(100*time.Millisecond),
		demandToRunning.Round(100*time.Millisecond), terminated.Sub(done).Round(100*time.Millisecond), idleToEnded.Round(100*time.Millisecond))
}

// autoscaleDrained reports whether Ray's autoscaler's log shows it drained
// nodes in the GCS and none failed.
func autoscaleDrained(mlog string) bool {
	v1 := regexp.MustCompile(`Draining [1-9][0-9]* raylet\(s\)\.`).MatchString(mlog) && !strings.Contains(mlog, "Failed to drain")
	v2 := strings.Contains(mlog, "success=True") && regexp.MustCompile(`Drained ray on [0-9a-f]+\(success=True`).MatchString(mlog)
	return v1 || v2
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func parseAutoscale(out string) (autoscaleResult, bool) {
	var r autoscaleResult
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "AUTOSCALE "); ok {
			return r, json.Unmarshal([]byte(rest), &r) == nil
		}
	}
	return r, false
}

func allCands(t *testing.T, c *rayCluster) []wire.Candidate {
	t.Helper()
	cs, err := c.admin.Candidates(context.Background())
	if err != nil {
		t.Fatalf("list candidates: %v", err)
	}
	return cs
}

func liveCands(t *testing.T, c *rayCluster) []wire.Candidate {
	var live []wire.Candidate
	for _, x := range allCands(t, c) {
		if x.State != wire.StateEnded {
			live = append(live, x)
		}
	}
	return live
}

func candidate(t *testing.T, c *rayCluster, id string) wire.Candidate {
	for _, x := range allCands(t, c) {
		if x.CandidateID == id {
			return x
		}
	}
	t.Fatalf("no candidate %s", id)
	return wire.Candidate{}
}

// monitorLog is the Ray head's monitor.log: its session dir is the one
// `ray start` names in STATE/ray-head.log (other Rays share /tmp/ray).
func monitorLog(c *rayCluster) string {
	b, _ := os.ReadFile(filepath.Join(c.state, "ray-head.log"))
	m := regexp.MustCompile(`(/[^\s\x1b]*/session_[^/\s]+)/logs/ray_process_exit\.log`).FindAllSubmatch(b, -1)
	if len(m) == 0 {
		return ""
	}
	log, _ := os.ReadFile(filepath.Join(string(m[len(m)-1][1]), "logs", "monitor.log"))
	return string(log)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
