package agentflow

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/whoami"
	"github.com/rayvast/rayvast/internal/wire"
)

const (
	instanceID      = "e2e-agentflow-1"
	containerAPIKey = "vast-container-api-key-e2e-5c1f9a0b7d"
	rayExitCode     = 7 // fakeray's exit code on SIGTERM: the agent must pass it on
)

// TestAgentFlow is the whole life of one candidate, as numbered steps.
func TestAgentFlow(t *testing.T) {
	requireRoot(t, "ip", "unshare", "capsh", "python3", "sh")
	repo := repoRoot(t)
	tmp := t.TempDir()
	headBin, agentBin := buildBinaries(t, repo, tmp)
	python := realPython(t)

	// 1. Network: the candidate's own netns, the head and the who-am-I
	// resolver on the host side of a veth pair.
	vn := newVethNet(t)
	dns, err := whoami.Start(net.JoinHostPort(vn.HostIP, "0"), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()

	// 2. The head: init, config with a 1 s heartbeat, serve.
	h := startHead(t, headBin, agentBin, tmp, vn.HostIP)

	// 3. A candidate over the admin API, its env as a provider would rent it.
	created := h.createCandidate(t, vn.NodeIP)
	secrets := h.secrets(t)
	secrets["join token"] = created.JoinToken
	secrets["CONTAINER_API_KEY"] = containerAPIKey

	state := filepath.Join(tmp, "node-state")
	record := filepath.Join(tmp, "fakeray.json")
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "TMPDIR=" + tmp,
		"RAYVAST_PORTS=" + portList(41000),
		"RAYVAST_PYTHON=" + python,
		"RAYVAST_STATE=" + state,
		"RAYVAST_EGRESS_RESOLVERS=" + fmt.Sprintf("opendns@%s,cloudflare@%s,google@%s", dns.Addr(), dns.Addr(), dns.Addr()),
		"RAYVAST_BOOT_TRIES=5", "RAYVAST_BOOT_MAXWAIT=2",
		"PYTHONPATH=" + filepath.Join(repo, "test", "fakeray"),
		"FAKERAY_RECORD=" + record,
		"FAKERAY_EXIT_CODE=" + strconv.Itoa(rayExitCode),
		"FAKERAY_IMPORT=rayvast_e2e_shim",
		"CONTAINER_API_KEY=" + containerAPIKey,
		"E2E_PLAIN=kept",                         // an ordinary variable: reaches Ray
		"E2E_COPY_OF_TOKEN=" + created.JoinToken, // a secret under another name: must not
	}
	for k, v := range created.Env {
		env = append(env, k+"="+v)
	}

	// 4. The candidate: bootloader.sh as PID 1 of a new PID namespace, in
	// the netns, with a private empty /dev/shm and no NET_RAW/NET_ADMIN.
	script := `mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm && exec capsh --drop=cap_net_raw,cap_net_admin -- -c 'exec sh "$0"' "$1"`
	cmd := exec.Command("ip", "netns", "exec", vn.NS, "unshare", "--pid", "--fork", "--mount-proc", "--", "sh", "-c", script, "sh", filepath.Join(repo, "bootloader.sh"))
	cmd.Env = env
	var agentErr syncBuffer
	cmd.Stdout, cmd.Stderr = &agentErr, &agentErr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		for _, c := range children(cmd.Process.Pid) {
			syscall.Kill(c, syscall.SIGKILL)
		}
	}()
	defer func() {
		if t.Failed() {
			t.Logf("agent output:\n%s", agentErr.String())
			t.Logf("head output:\n%s", h.stderr.String())
		}
	}()

	// 5. Ray (the stand-in) runs: its record appears.
	rec := waitRecord(t, record, exited, 90*time.Second)
	t.Logf("BUDGET time from bootloader start to ray running: %v", time.Since(start).Round(time.Millisecond))
	if m := firstMatch(agentErr.String(), "since_exec="); m != "" {
		t.Logf("BUDGET time from agent exec to ray started (agent's own measure): %s", m)
	}

	// 6. The agent is PID 1 of its namespace, and Ray is its child.
	agentPID := onlyChild(t, cmd.Process.Pid)
	if ns := procStatus(agentPID, "NSpid"); !strings.HasSuffix(ns, "\t1") {
		t.Errorf("agent NSpid = %q, want PID 1 in its namespace", ns)
	}
	if rec.PPID != 1 {
		t.Errorf("ray's parent is pid %d in the namespace, want 1 (the agent)", rec.PPID)
	}
	rayPID := onlyChild(t, agentPID)
	if ns := procStatus(rayPID, "NSpid"); !strings.HasSuffix(ns, "\t"+strconv.Itoa(rec.PID)) {
		t.Errorf("ray host pid %d has NSpid %q, record says pid %d", rayPID, ns, rec.PID)
	}

	// 7. The exact SPEC §9 command line, from the bundle the agent wrote.
	wantArgv := expectedArgv(t, state)
	if got := append([]string{"-m"}, rec.Argv...); !slices.Equal(rec.OrigArgv[1:], wantArgv) {
		t.Errorf("ray argv:\ngot  %q\nwant %q\n(argv %q)", rec.OrigArgv[1:], wantArgv, got)
	}
	if rec.Executable != python {
		t.Errorf("ray runs %q, want RAYVAST_PYTHON %q", rec.Executable, python)
	}

	// 8. Ray's environment: no RAYVAST_*, no CONTAINER_API_KEY, no secret
	// value under any name; the TLS and token settings are there.
	rayEnv := environ(t, rayPID)
	checkRayEnv(t, "/proc/PID/environ", rayEnv, secrets, state)
	var recEnv []string
	for k, v := range rec.Env {
		recEnv = append(recEnv, k+"="+v)
	}
	checkRayEnv(t, "the record", recEnv, secrets, state)
	if rec.Imports["rayvast_e2e_shim"] != true {
		t.Errorf("the shim is not importable by Ray: %v", rec.Imports["rayvast_e2e_shim"])
	}

	// 9. The head shows the node enrolled, its heartbeats arriving, and it
	// healthy: its polls of the guest API's v1 Health (HTTPS with the node
	// cert) with the token from the heartbeats succeed.
	n1 := h.waitNode(t, func(n wire.Node) bool { return n.State == wire.StateEnrolled && n.Seq >= 1 })
	n2 := h.waitNode(t, func(n wire.Node) bool { return n.Seq >= n1.Seq+2 && n.Health == wire.HealthHealthy })
	t.Logf("heartbeats: seq %d then %d; ray %+v", n1.Seq, n2.Seq, n2.Ray)
	if n2.Ray.State != wire.RayRunning || n2.PublicIP != vn.NodeIP {
		t.Errorf("node = %+v, want ray running at %s", n2, vn.NodeIP)
	}

	// 10. Budget: the agent's resident memory while it supervises.
	rss := procStatus(agentPID, "VmRSS")
	t.Logf("BUDGET agent VmRSS while supervising: %s (budget 20 MiB)", rss)
	if kb, err := strconv.Atoi(strings.Fields(rss + " 0")[0]); err == nil && kb > 20<<10 {
		t.Errorf("agent VmRSS %d kB over the 20 MiB budget", kb)
	}

	// 11. SIGTERM to the agent: Ray gets SIGTERM, its exit code comes back.
	if err := syscall.Kill(agentPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err == nil {
			code = 0
		}
		if code != rayExitCode {
			t.Errorf("sandbox exit code %d (%v), want Ray's %d", code, err, rayExitCode)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("agent did not exit within 60 s of SIGTERM")
	}
	final := readRecord(t, record)
	if final.Signal != int(syscall.SIGTERM) {
		t.Errorf("ray's record: signal %d, want SIGTERM", final.Signal)
	}
	last := h.waitNode(t, func(n wire.Node) bool { return n.Ray.State == wire.RayExited })
	if last.Ray.ExitCode == nil || *last.Ray.ExitCode != rayExitCode {
		t.Errorf("head's view of ray at the end: %+v, want exited with %d", last.Ray, rayExitCode)
	}
	if want := `event=ray_exited detail="exit code ` + strconv.Itoa(rayExitCode) + `"`; !strings.Contains(h.stderr.String(), want) {
		t.Errorf("head did not log the report %s", want)
	}

	// 12. No secret in the agent's or the head's output.
	nodeKey, _ := os.ReadFile(filepath.Join(state, "node.key"))
	secrets["node key"] = pemBody(string(nodeKey))
	for name, s := range secrets {
		if s == "" {
			t.Errorf("secret %q is empty: the test would prove nothing", name)
			continue
		}
		if strings.Contains(agentErr.String(), s) {
			t.Errorf("the %s appears in the agent's output", name)
		}
		if strings.Contains(h.stderr.String(), s) {
			t.Errorf("the %s appears in the head's output", name)
		}
	}
}

func checkRayEnv(t *testing.T, where string, env []string, secrets map[string]string, state string) {
	t.Helper()
	has := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		has[k] = v
		if strings.HasPrefix(k, "RAYVAST_") || k == wire.EnvVastAPIKey {
			t.Errorf("%s: %s reached Ray", where, k)
		}
		for name, s := range secrets {
			if s != "" && strings.Contains(v, s) {
				t.Errorf("%s: the %s reached Ray in %s", where, name, k)
			}
		}
	}
	want := map[string]string{
		"RAY_USE_TLS": "1", "RAY_AUTH_MODE": "token",
		"RAY_TLS_SERVER_CERT": filepath.Join(state, "node.crt"), "RAY_TLS_SERVER_KEY": filepath.Join(state, "node.key"),
		"RAY_TLS_CA_CERT": filepath.Join(state, "ca.crt"), "RAY_AUTH_TOKEN_PATH": filepath.Join(state, "cluster_token"),
		"E2E_PLAIN": "kept",
	}
	for k, v := range want {
		if has[k] != v {
			t.Errorf("%s: %s=%q, want %q", where, k, has[k], v)
		}
	}
	if !strings.HasPrefix(has["PYTHONPATH"], filepath.Join(state, "shim")+":") {
		t.Errorf("%s: PYTHONPATH=%q, want the shim dir first", where, has["PYTHONPATH"])
	}
}

// expectedArgv is SPEC §9's command line written out by hand from the
// Ray parameters the agent stored (bundle.json), after the Python.
func expectedArgv(t *testing.T, state string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Ray wire.RayParams `json:"ray"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	r := info.Ray
	workers := make([]string, len(r.WorkerPorts))
	for i, p := range r.WorkerPorts {
		workers[i] = strconv.Itoa(p)
	}
	res, _ := json.Marshal(r.Resources)
	lab, _ := json.Marshal(r.Labels)
	return []string{"-m", "ray.scripts.scripts", "start", "--block",
		"--address=" + r.HeadAddress, "--node-ip-address=" + r.NodeIPAddress,
		"--node-manager-port=" + strconv.Itoa(r.NodeManagerPort),
		"--object-manager-port=" + strconv.Itoa(r.ObjectManagerPort),
		"--runtime-env-agent-port=" + strconv.Itoa(r.RuntimeEnvAgentPort),
		"--dashboard-agent-grpc-port=" + strconv.Itoa(r.DashboardAgentGRPCPort),
		"--dashboard-agent-listen-port=" + strconv.Itoa(r.DashboardAgentListenPort),
		"--metrics-export-port=" + strconv.Itoa(r.MetricsExportPort),
		"--worker-port-list=" + strings.Join(workers, ","),
		"--num-gpus=" + strconv.Itoa(r.NumGPUs),
		"--resources=" + string(res), "--labels=" + string(lab)}
}

type fakeRecord struct {
	Argv       []string          `json:"argv"`
	OrigArgv   []string          `json:"orig_argv"`
	Executable string            `json:"executable"`
	Env        map[string]string `json:"env"`
	PID        int               `json:"pid"`
	PPID       int               `json:"ppid"`
	Imports    map[string]any    `json:"imports"`
	Signal     int               `json:"signal"`
}

func readRecord(t *testing.T, path string) fakeRecord {
	t.Helper()
	var r fakeRecord
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func waitRecord(t *testing.T, path string, exited <-chan error, limit time.Duration) fakeRecord {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return readRecord(t, path)
		}
		select {
		case err := <-exited:
			t.Fatalf("the candidate exited before Ray started: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("no fakeray record after %v", limit)
	return fakeRecord{}
}

// onlyChild waits for pid to have exactly one child and returns it.
func onlyChild(t *testing.T, pid int) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		if c := children(pid); len(c) == 1 {
			return c[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("pid %d has children %v, want exactly one", pid, children(pid))
	return 0
}

// realPython resolves python3 to the interpreter itself, not a wrapper
// script (pyenv shims fork), so Ray's argv[0] and parent are exact.
func realPython(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import os,sys; print(os.path.realpath(sys.executable))").Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func portList(base int) string {
	p := make([]string, wire.PortCount)
	for i := range p {
		p[i] = strconv.Itoa(base + i)
	}
	return strings.Join(p, ",")
}

func firstMatch(s, key string) string {
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	return strings.Fields(s[i+len(key):])[0]
}

// pemBody is the base64 of a PEM block without its header lines.
func pemBody(p string) string {
	var lines []string
	for _, l := range strings.Split(p, "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)/2] // one full line of key material
}
