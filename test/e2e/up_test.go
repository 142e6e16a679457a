package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestUpDockerExample is the README's first real cluster (docs/running.md's
// quick start): `head up --config examples/docker.json --python <real Ray's
// venv>` brings up a real Ray head
// and two real Ray nodes in containers with one command; Ctrl-C stops the
// head and the Ray head and leaves the rentals; `head down --config` ends
// them. The example is used as shipped but for its cluster name and head
// IP (two runs at once must not share them).
func TestUpDockerExample(t *testing.T) {
	needSuite(t)
	image, python := rayImage(t, rvtest.RayNewest)
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(suite.repo, "examples", "docker.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cluster := fmt.Sprintf("%sup-%d", clusterPrefix, time.Now().UnixNano()%1e6)
	t.Cleanup(func() {
		_ = vastnet.Cleanup(context.Background(), suite.eng, func(c string) bool { return c == cluster })
	})
	headIP := nextHeadIP()
	cfg["cluster"] = cluster
	cfg["ray"].(map[string]any)["head_address"] = headIP + ":6379"
	cfg["heartbeat_interval_s"] = heartbeatInterval
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "docker.json")
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "docker.state")
	if v := cfg["ray"].(map[string]any)["version"]; v != rvtest.RayNewest {
		t.Errorf("examples/docker.json names Ray %v, the suite's newest is %s", v, rvtest.RayNewest)
	}

	out := &rvtest.Buffer{}
	cmd := exec.Command(suite.head, "up", "--config", cfgPath, "--python", python, "--agent", suite.agent,
		"--bootloader", filepath.Join(suite.repo, "bootloader.sh"))
	cmd.Env = append(os.Environ(), docker.EnvImage+"="+image, "RAY_USAGE_STATS_ENABLED=0")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
		t.Logf("head up output:\n%s", out.String())
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(state, "head.log")); err == nil {
				t.Logf("head.log:\n%s", b)
			}
		}
	}()

	admin := adminclient.Unix(filepath.Join(state, statedir.AdminSocket), 5*time.Second)
	waitFor(t, 3*time.Minute, "two nodes with Ray running", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("head up exited early: %v\n%s", err, out.String())
		default:
		}
		nodes, err := admin.Nodes(context.Background())
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, n := range nodes {
			if n.Ray.State == "running" {
				running++
			}
		}
		// and head up's live summary has caught up (it polls every 2 s)
		summary := strings.Contains(out.String(), "nodes: 2 (2 with Ray running) · Ray head: running")
		return running == 2 && summary, fmt.Sprintf("%d nodes, %d with Ray running, summary shown %v", len(nodes), running, summary)
	})
	text := out.String()
	for _, want := range []string{"state: made " + state, "Ray head: running at " + headIP + ":6379", "listening: port A " + headIP,
		"Ray autoscaler config: ", ": enrolled"} {
		if !strings.Contains(text, want) {
			t.Errorf("progress lacks %q", want)
		}
	}
	rayHead := rayHeadProcess(t, state)
	if !strings.Contains(strings.Join(rayHead.argv, " "), "start --head --block --node-ip-address="+headIP+" --port=6379") {
		t.Errorf("Ray head argv = %v", rayHead.argv)
	}
	for k, v := range map[string]string{"RAY_USE_TLS": "1", "RAY_AUTH_MODE": "token", "RAY_CLOUD_INSTANCE_ID": "head"} {
		if rayHead.env[k] != v {
			t.Errorf("Ray head env %s = %q, want %q", k, rayHead.env[k], v)
		}
	}
	if !strings.HasPrefix(rayHead.env["PATH"], filepath.Dir(python)+":") {
		t.Errorf("Ray head PATH = %q, want the venv's bin first (jobs run with the cluster's Python)", rayHead.env["PATH"])
	}
	// The quick start's work runs on the rentals (issue 29): 20 plain
	// tasks through head run, none on the head's machine, which offers
	// the cluster no CPUs by default.
	job, err := exec.Command(suite.head, "run", "--state", state, "--", "python", "-c", tasksWhereCode).CombinedOutput()
	if err != nil {
		t.Errorf("head run of 20 tasks: %v\n%s", err, job)
	} else if ips := tasksRanOn(string(job)); len(ips) != 20 || slices.Contains(ips, headIP) {
		t.Errorf("20 tasks ran on %v, want 20 and none on the head's machine (%s):\n%s", ips, headIP, job)
	}
	st, err := exec.Command(suite.head, "status", "--state", state).CombinedOutput()
	if err != nil || !strings.Contains(string(st), "RAY HEAD  "+headIP+":6379  running") {
		t.Errorf("head status (%v) lacks the Ray head's line:\n%s", err, st)
	}

	// Ctrl-C: the head and the Ray head stop; the rentals stay.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("head up after Ctrl-C: %v, want exit 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("head up did not stop within a minute of Ctrl-C")
	}
	if err := syscall.Kill(rayHead.pid, 0); err != syscall.ESRCH {
		t.Errorf("the Ray head (pid %d) still runs after Ctrl-C: %v", rayHead.pid, err)
	}
	cs, err := suite.eng.ListContainers(context.Background(), vastnet.LabelCluster+"="+cluster)
	if err != nil || len(cs) != 2 {
		t.Errorf("after Ctrl-C: %d containers (%v), want the 2 rentals kept for head down", len(cs), err)
	}
	down, err := exec.Command(suite.head, "down", "--config", cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("head down: %v\n%s", err, down)
	}
	cs, err = suite.eng.ListContainers(context.Background(), vastnet.LabelCluster+"="+cluster)
	if err != nil || len(cs) != 0 {
		t.Errorf("after head down: %d containers (%v), want 0\n%s", len(cs), err, down)
	}
	if ns, err := suite.eng.ListNetworks(context.Background(), vastnet.LabelCluster+"="+cluster); err != nil || len(ns) != 0 {
		t.Errorf("after head down: %d networks (%v), want 0", len(ns), err)
	}
}

type process struct {
	pid  int
	argv []string
	env  map[string]string
}

// rayHeadProcess reads the Ray head's argv and environment from /proc, by
// the PID head up records in STATE/ray-head.json.
func rayHeadProcess(t *testing.T, state string) process {
	t.Helper()
	st, ok, err := rayhead.ReadStatus(state)
	if err != nil || !ok || st.PID == 0 {
		t.Fatalf("Ray head status: %+v %v %v", st, ok, err)
	}
	p := process{pid: st.PID, env: map[string]string{}}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", st.PID))
	if err != nil {
		t.Fatal(err)
	}
	p.argv = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/environ", st.PID))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			p.env[k] = v
		}
	}
	return p
}

// tasksWhereCode is a driver of 20 plain tasks, each saying the IP of the
// node it ran on, one "RAN-ON ip" line per task.
const tasksWhereCode = `
import ray
ray.init()
@ray.remote
def where():
    return ray.util.get_node_ip_address()
for ip in ray.get([where.remote() for _ in range(20)], timeout=180):
    print("RAN-ON", ip)
`

// tasksRanOn reads tasksWhereCode's output: the IP of each task's node.
func tasksRanOn(out string) (ips []string) {
	for _, l := range strings.Split(out, "\n") {
		if ip, ok := strings.CutPrefix(strings.TrimSpace(l), "RAN-ON "); ok {
			ips = append(ips, ip)
		}
	}
	return ips
}
