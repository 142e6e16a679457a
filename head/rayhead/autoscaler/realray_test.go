package autoscaler

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestRealRayAutoscaler runs Ray's own autoscaler (the monitor a Ray head
// started with --autoscaling-config runs, real Ray from the venv) against
// the plugin and a real `head serve --provider none`: a driver's
// request_resources for two GPU bundles makes Ray create two candidates of
// the node type through the plugin; a candidate the head ends (as it ends a
// refused one) leaves Ray's listing and Ray creates a replacement; and the
// monitor never errors. v1 is what `head up` runs; v2
// (RAY_enable_autoscaler_v2=1, not official for external providers: Ray
// issue #57153) is run too, to say in docs/ray.md what it does.
func TestRealRayAutoscaler(t *testing.T) {
	py := rvtest.RayPython(t, rvtest.RayNewest)
	ip := localIPv4(t)
	dir := t.TempDir()
	head := rvtest.Build(t, dir, "./head")
	sock := startHead(t, head, dir)
	for _, v := range []string{"v1", "v2"} {
		t.Run(v, func(t *testing.T) { realRayScales(t, py, ip, sock, v) })
	}
}

// startHead runs `head init` and `head serve --provider none` in dir and
// returns its admin socket.
func startHead(t *testing.T, head, dir string) string {
	t.Helper()
	state := filepath.Join(dir, "state")
	if out, err := exec.Command(head, "init", "--state", state, "--ip", "127.0.0.1", "--cluster", "realray").CombinedOutput(); err != nil {
		t.Fatalf("head init: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"cluster":"realray","ray":{"head_address":"127.0.0.1:6379"},
		"node_types":{"gpu1":{"gpus":1,"max_workers":4,"resources":{},"labels":{"gpu":"4090"}}},
		"guest_api":{},"provider":{"kind":"none"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	serve := exec.CommandContext(ctx, head, "serve", "--state", state, "--config", cfg, "--agent", head,
		"--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0", "--firewall", "off")
	log := &rvtest.Buffer{}
	serve.Stdout, serve.Stderr = log, log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = serve.Wait() })
	sock := filepath.Join(state, statedir.AdminSocket)
	rvtest.WaitFor(t, 30*time.Second, func() error {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return fmt.Errorf("head serve did not listen on %s: %w\n%s", sock, err, log.String())
		}
		return c.Close()
	})
	return sock
}

func realRayScales(t *testing.T, py, ip, sock, version string) {
	dir := t.TempDir()
	// Every port Ray binds on its own is named: other Rays run on this
	// machine, and a port of Ray's default worker range may be in use.
	ports := rvtest.FreePorts(t, ip, 4+8)
	workers := make([]string, 0, 8)
	for _, p := range ports[4:] {
		workers = append(workers, strconv.Itoa(p))
	}
	address := net.JoinHostPort(ip, strconv.Itoa(ports[0]))
	cfg := filepath.Join(dir, "autoscaler.yaml")
	// example.yaml as shipped, pointed at this head (Ray's own yaml reads it).
	pyRun(t, py, nil, `
import json, sys, yaml
c = yaml.safe_load(open("example.yaml"))
c["cluster_name"] = "realray"
c["provider"]["admin_socket"], c["provider"]["head_ip"] = sys.argv[1], sys.argv[2]
c["available_node_types"]["gpu1"]["min_workers"] = 0
json.dump(c, open(sys.argv[3], "w"))
`, sock, ip, cfg)

	here, _ := os.Getwd()
	// Its own temp dir (never another Ray's /tmp/ray), short: Ray's socket
	// paths under it must fit AF_UNIX's 107 bytes.
	temp, err := os.MkdirTemp("", "rvas")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(temp) })
	env := []string{"PYTHONPATH=" + here, "RAY_USAGE_STATS_ENABLED=0", "AUTOSCALER_METRIC_PORT=" + strconv.Itoa(ports[3])}
	if version == "v2" {
		env = append(env, "RAY_enable_autoscaler_v2=1", "RAY_CLOUD_INSTANCE_ID=head", "RAY_NODE_TYPE_NAME=head")
	}
	ray := exec.Command(py, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--disable-usage-stats",
		"--node-ip-address="+ip, "--port="+strconv.Itoa(ports[0]), "--ray-client-server-port="+strconv.Itoa(ports[1]),
		"--dashboard-agent-listen-port="+strconv.Itoa(ports[2]), "--include-dashboard=false", "--num-cpus=1",
		"--worker-port-list="+strings.Join(workers, ","),
		"--temp-dir="+temp, "--autoscaling-config="+cfg)
	ray.Env = append(os.Environ(), env...)
	ray.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	rayLog := &rvtest.Buffer{}
	ray.Stdout, ray.Stderr = rayLog, rayLog
	if err := ray.Start(); err != nil {
		t.Fatal(err)
	}
	monitorLog := func() string {
		b, _ := os.ReadFile(filepath.Join(temp, "session_latest", "logs", "monitor.log"))
		return string(b)
	}
	defer func() {
		stopGroup(ray)
		if t.Failed() {
			t.Logf("ray start:\n%s\nmonitor.log:\n%s", rayLog.String(), monitorLog())
		}
		endAll(t, sock)
	}()

	// The demand: two bundles of the node type's resource (GPU), held in
	// Ray's GCS after the driver exits.
	demand := func(n int) {
		pyRun(t, py, env, `
import sys, ray
from ray.autoscaler.sdk import request_resources
ray.init(address=sys.argv[1], log_to_driver=False)
request_resources(bundles=[{"GPU": 1}] * int(sys.argv[2]))
`, address, strconv.Itoa(n))
	}
	waitRayUp(t, rayLog)
	demand(2)
	var first []string
	waitLive(t, sock, 2, 90*time.Second, monitorLog, func(live []string) { first = live })

	// The head ends one (as it ends a candidate refused at enrollment): it
	// leaves Ray's listing and Ray, its demand unmet, makes another.
	if err := endCandidate(sock, first[0]); err != nil {
		t.Fatal(err)
	}
	waitLive(t, sock, 2, 90*time.Second, monitorLog, func(live []string) {
		for _, id := range live {
			if id == first[0] {
				t.Errorf("ended candidate %s is still live", first[0])
			}
		}
	})
	for _, bad := range []string{"Error during autoscaling", "Too many errors", "KeyError"} {
		if strings.Contains(monitorLog(), bad) {
			t.Errorf("monitor.log says %q:\n%s", bad, monitorLog())
		}
	}
}

// waitLive waits until exactly n candidates are live (not ended) and calls
// then with their IDs.
func waitLive(t *testing.T, sock string, n int, limit time.Duration, monitorLog func() string, then func([]string)) {
	t.Helper()
	var live []string
	ok := rvtest.Until(limit, func() bool {
		live = liveCandidates(t, sock)
		return len(live) == n
	})
	if !ok {
		t.Fatalf("after %s: live candidates %v, want %d (Ray's autoscaler did not drive the plugin)\nmonitor.log tail:\n%s",
			limit, live, n, tail(monitorLog(), 4000))
	}
	then(live)
}

func liveCandidates(t *testing.T, sock string) []string {
	t.Helper()
	cs, err := adminclient.Unix(sock, 10*time.Second).Candidates(context.Background())
	if err != nil {
		t.Fatalf("list candidates: %v", err)
	}
	var live []string
	for _, c := range cs {
		if c.State != wire.StateEnded && c.NodeType == "gpu1" {
			live = append(live, c.CandidateID)
		}
	}
	return live
}

func endCandidate(sock, id string) error {
	return adminclient.Unix(sock, 10*time.Second).End(context.Background(), id)
}

// endAll ends every candidate left, so the next subtest starts from none.
func endAll(t *testing.T, sock string) {
	for _, id := range liveCandidates(t, sock) {
		if err := endCandidate(sock, id); err != nil {
			t.Error(err)
		}
	}
}

// waitRayUp waits for `ray start` to say the head runs (a driver that
// connects before the GCS listens can hang for minutes).
func waitRayUp(t *testing.T, log *rvtest.Buffer) {
	t.Helper()
	ok := rvtest.Until(3*time.Minute, func() bool {
		return strings.Contains(log.String(), "Ray runtime started") || strings.Contains(log.String(), "Error")
	})
	if !ok || !strings.Contains(log.String(), "Ray runtime started") {
		t.Fatalf("Ray head did not come up:\n%s", log.String())
	}
}

func pyRun(t *testing.T, py string, env []string, code string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{"-c", code}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
}

// stopGroup ends `ray start --block` and everything it started: SIGTERM to
// its process group, SIGKILL after 20 s (Ray takes its time to stop).
func stopGroup(cmd *exec.Cmd) {
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-done
}

// localIPv4 is an IPv4 address of this machine other than loopback: Ray
// replaces a loopback head address with the machine's own, so the
// plugin's head_ip would not be the head Ray reports.
func localIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	rvtest.Need(t, "a non-loopback IPv4 address for the Ray head")
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
