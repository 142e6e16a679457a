package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/demo"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/rayenv"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// Real Ray in the suite: a candidate image per Ray version carrying real
// Ray (copied from rayenv's venv of that version), and `head up` running
// the Ray head with the same venv's Python, as a user runs it.

var rayImages struct {
	sync.Mutex
	m map[string]string
}

// rayImage is the candidate image with real Ray of version (built once).
func rayImage(t testing.TB, version string) (image, python string) {
	return rayImageWith(t, version)
}

// rayImageWith is rayImage on a base that also holds the Debian packages
// named (the training tests' python3-torch).
func rayImageWith(t testing.TB, version string, packages ...string) (image, python string) {
	t.Helper()
	needSuite(t)
	python = rvtest.RayPython(t, version)
	key := strings.Join(append([]string{version}, packages...), "+")
	rayImages.Lock()
	defer rayImages.Unlock()
	if img, ok := rayImages.m[key]; ok {
		return img, python
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	img, err := candidateimage.Build(ctx, candidateimage.Config{Engine: suite.eng, RayVersion: version, Packages: packages,
		RayWheels: rayenv.SharedWheels(suite.repo), RayVenvDir: filepath.Dir(filepath.Dir(python))})
	if err != nil {
		t.Fatalf("image with Ray %s and %q: %v", version, packages, err)
	}
	t.Logf("image %s with real Ray %s and %q ready in %s", img, version, packages, time.Since(start).Round(time.Millisecond))
	if rayImages.m == nil {
		rayImages.m = map[string]string{}
	}
	rayImages.m[key] = img
	return img, python
}

// rayCluster is `head up` on the Docker provider with real Ray: the Ray
// head on this machine, `workers` nodes in containers behind vast's NAT.
type rayCluster struct {
	t                      testing.TB
	name, headIP, dir      string
	cfgPath, state, python string
	portA, portB           int // the head's ports A and B
	start                  time.Time
	cmd                    *exec.Cmd
	out                    *rvtest.Buffer
	done                   chan error
	admin                  *adminclient.Client
}

func startRayCluster(t testing.TB, version string, workers int, upArgs ...string) *rayCluster {
	return startRayClusterMinMax(t, version, workers, workers, upArgs...)
}

// startRayClusterMinMax is startRayCluster with the node type's min_workers
// and max_workers apart (min 0: candidates come only from the admin API).
func startRayClusterMinMax(t testing.TB, version string, minWorkers, maxWorkers int, upArgs ...string) *rayCluster {
	t.Helper()
	return startRayClusterEdit(t, version, minWorkers, maxWorkers, nil, upArgs...)
}

// startRayClusterEdit is startRayClusterMinMax with edit applied to the
// config before head up reads it.
func startRayClusterEdit(t testing.TB, version string, minWorkers, maxWorkers int, edit func(cfg map[string]any), upArgs ...string) *rayCluster {
	t.Helper()
	image, python := rayImage(t, version)
	return startRayClusterImage(t, version, image, python, minWorkers, maxWorkers, edit, upArgs...)
}

// startRayClusterImage is startRayClusterEdit with the nodes' image given.
func startRayClusterImage(t testing.TB, version, image, python string, minWorkers, maxWorkers int, edit func(cfg map[string]any), upArgs ...string) *rayCluster {
	t.Helper()
	name := fmt.Sprintf("%sray-%d", clusterPrefix, time.Now().UnixNano()%1e6)
	// The GCS and ports A and B: three different free ports (picked one by
	// one they once came out the same, and the Ray head never started).
	ports := freePorts(t, 3)
	c := &rayCluster{t: t, name: name, dir: t.TempDir(), python: python, out: &rvtest.Buffer{}, done: make(chan error, 1),
		headIP: nextHeadIP()}
	cfg := map[string]any{
		"cluster": name,
		// Ray's GCS binds all addresses: a port of its own per cluster, so
		// two clusters on this machine (tests run at once) do not meet.
		"ray": map[string]any{"head_address": c.headIP + ":" + ports[0], "version": version},
		"node_types": map[string]any{safeType: map[string]any{"gpus": 0, "min_workers": minWorkers, "max_workers": maxWorkers,
			"resources": map[string]any{}, "labels": map[string]any{"e2e": "real-ray"}}},
		"guest_api":            map[string]any{"anonymous_scopes": []string{"guest:health"}},
		"provider":             map[string]any{"kind": "docker"},
		"heartbeat_interval_s": heartbeatInterval,
		"public_logs":          true,
	}
	if edit != nil {
		edit(cfg)
	}
	b, _ := json.Marshal(cfg)
	c.cfgPath = filepath.Join(c.dir, "cluster.json")
	c.state = filepath.Join(c.dir, "cluster.state")
	if err := os.WriteFile(c.cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Ports A and B of their own, not 8443/8444: another head on this
	// machine with its firewall on drops every connection to its ports
	// whatever the destination address (head/firewall matches dport only).
	args := append([]string{"up", "--config", c.cfgPath, "--python", python, "--agent", suite.agent,
		"--bootloader", filepath.Join(suite.repo, "bootloader.sh"),
		"--listen-a", c.headIP + ":" + ports[1], "--listen-b", c.headIP + ":" + ports[2]}, upArgs...)
	c.portA, _ = strconv.Atoi(ports[1])
	c.portB, _ = strconv.Atoi(ports[2])
	c.cmd = exec.Command(suite.head, args...)
	c.cmd.Env = append(os.Environ(), docker.EnvImage+"="+image, "RAY_USAGE_STATS_ENABLED=0")
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.start = time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	c.admin = adminclient.Unix(filepath.Join(c.state, statedir.AdminSocket), 5*time.Second)
	t.Cleanup(c.stop)
	return c
}

// stop ends head up (Ctrl-C) and removes the cluster's containers and
// networks; on failure it logs what each part said.
func (c *rayCluster) stop() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(time.Minute):
			c.t.Errorf("head up did not stop within a minute of Ctrl-C")
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	if c.t.Failed() {
		c.t.Logf("head up output:\n%s", c.out.String())
		for _, f := range []string{"head.log", "ray-head.log"} {
			if b, err := os.ReadFile(filepath.Join(c.state, f)); err == nil {
				c.t.Logf("%s (last 6 KiB):\n%s", f, lastBytes(b, 6<<10))
			}
		}
		(&cluster{t: c.t, name: c.name}).dumpContainers()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := vastnet.Cleanup(ctx, suite.eng, func(cl string) bool { return cl == c.name }); err != nil {
		c.t.Errorf("cleanup %s: %v", c.name, err)
	}
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// nodes lists the head's nodes.
func (c *rayCluster) nodes() []wire.Node {
	nodes, err := c.admin.Nodes(context.Background())
	if err != nil {
		return nil
	}
	return nodes
}

// waitRunning waits until n nodes report Ray running and returns them.
func (c *rayCluster) waitRunning(n int, limit time.Duration) []wire.Node {
	c.t.Helper()
	var nodes []wire.Node
	waitFor(c.t, limit, fmt.Sprintf("%d nodes with Ray running", n), func() (bool, string) {
		select {
		case err := <-c.done:
			c.t.Fatalf("head up exited early: %v\n%s", err, c.out.String())
		default:
		}
		nodes = nodes[:0]
		for _, x := range c.nodes() {
			if x.Ray.State == wire.RayRunning {
				nodes = append(nodes, x)
			}
		}
		return len(nodes) == n, fmt.Sprintf("%d running", len(nodes))
	})
	return nodes
}

// job runs the demo's cluster job from the head's machine through
// `head run` (the user's one command) and returns its result and output.
func (c *rayCluster) job(nodes int, wait time.Duration, ips ...string) (demo.JobResult, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.head, "run", "--state", c.state, "--", "python",
		filepath.Join(suite.repo, "head", "demo", "clusterjob.py"), "--nodes", fmt.Sprint(nodes),
		"--wait", fmt.Sprint(int(wait.Seconds())), "--task-timeout", "60", "--ips", strings.Join(ips, ","))
	out, _ := cmd.CombinedOutput()
	res, _ := demo.ParseJobOutput(string(out))
	return res, string(out)
}

// containerOf is the container ID of a node (the provider names containers
// by instance ID).
func containerOf(t testing.TB, instanceID string) string {
	t.Helper()
	info, err := suite.eng.InspectContainer(context.Background(), instanceID)
	if err != nil {
		t.Fatalf("inspect %s: %v", instanceID, err)
	}
	return info.ID
}

// procsOf lists the host PIDs and command lines of a container's
// processes (by their cgroup naming the container ID).
func procsOf(t testing.TB, containerID string) map[int]string {
	t.Helper()
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !strings.Contains(string(cg), containerID) {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out[pid] = strings.ReplaceAll(string(cmd), "\x00", " ")
	}
	return out
}

// freePorts are n different free ports, for a Ray head's GCS (which binds
// every address) and the head's own: from 6400–7999, clear of Ray's other
// defaults (dashboard 8265, worker ports 10002–19999, which a GCS port may
// not fall in) and of the kernel's ephemeral range.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for range 200 * n {
		p := fmt.Sprint(6400 + rand.IntN(1600))
		if slices.Contains(out, p) {
			continue
		}
		if l, err := net.Listen("tcp", ":"+p); err == nil {
			l.Close()
			if out = append(out, p); len(out) == n {
				return out
			}
		}
	}
	t.Fatalf("no %d free ports in 6400-7999 for the Ray head and the head", n)
	return nil
}

var headIPs struct {
	sync.Mutex
	used map[string]bool
}

// nextHeadIP is a head IP of its own for each cluster of this test
// process (two at once in one test must not meet), 10.X.Y.1 with X from
// the PID so that test processes running at once differ too.
func nextHeadIP() string {
	headIPs.Lock()
	defer headIPs.Unlock()
	if headIPs.used == nil {
		headIPs.used = map[string]bool{}
	}
	for y := time.Now().UnixNano() % 250; ; y = (y + 1) % 250 {
		ip := fmt.Sprintf("10.%d.%d.1", 100+os.Getpid()%100, y)
		if !headIPs.used[ip] {
			headIPs.used[ip] = true
			return ip
		}
	}
}
