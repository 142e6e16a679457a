package agentflow

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/raylaunch"
	"github.com/rayvast/rayvast/head/shim"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

const (
	instanceID      = "e2e-agentflow-1"
	containerAPIKey = "vast-container-api-key-e2e-5c1f9a0b7d"
	rayExitCode     = 7 // fakeray's exit code on SIGTERM: the agent must pass it on
)

// TestAgentFlow is the whole life of one candidate, as numbered steps.
func TestAgentFlow(t *testing.T) {
	f := newFlow(t)
	f.start()
	h, state, record, secrets, python := f.head, f.state, f.record, f.secrets, f.python
	agentErr, start := f.out, f.started
	vn := f.vn

	// 5. Ray (the stand-in) runs: its record appears.
	rec := f.waitRecord(90 * time.Second)
	t.Logf("BUDGET time from bootloader start to ray running: %v", time.Since(start).Round(time.Millisecond))
	if m := firstMatch(agentErr.String(), "since_exec="); m != "" {
		t.Logf("BUDGET time from agent exec to ray started (agent's own measure): %s", m)
	}

	if strings.Contains(agentErr.String(), "not the one RAYVAST_BOOTSTRAP_SHA256") {
		t.Error("the agent bootloader.sh ran is not the one the head serves")
	}

	// 6. The agent is PID 1 of its namespace, and Ray is its child.
	agentPID := f.agentPID()
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

	// 7. The exact docs/protocol.md §9 command line, from the bundle the agent wrote.
	tempDir := checkTempDir(t, rec.OrigArgv, state)
	wantArgv := expectedArgv(t, state, tempDir)
	if got := append([]string{"-m"}, rec.Argv...); !slices.Equal(rec.OrigArgv[1:], wantArgv) {
		t.Errorf("ray argv:\ngot  %q\nwant %q\n(argv %q)", rec.OrigArgv[1:], wantArgv, got)
	}
	if rec.Executable != python {
		t.Errorf("ray runs %q, want RAYVAST_PYTHON %q", rec.Executable, python)
	}

	// 8. Ray's environment: no RAYVAST_*, no CONTAINER_API_KEY, no secret
	// value under any name; the TLS and token settings are there.
	// The agent's own /proc/PID/environ is readable by Ray's workers (same
	// uid): the agent re-executed itself, so neither the join token nor
	// CONTAINER_API_KEY is in it, under any name.
	for _, kv := range environ(t, agentPID) {
		k, v, _ := strings.Cut(kv, "=")
		for _, name := range []string{"join token", "CONTAINER_API_KEY"} {
			if strings.Contains(v, secrets[name]) {
				t.Errorf("agent's /proc/PID/environ holds the %s in %s", name, k)
			}
		}
	}
	rayEnv := environ(t, rayPID)
	checkRayEnv(t, "/proc/PID/environ", rayEnv, secrets, state)
	var recEnv []string
	for k, v := range rec.Env {
		recEnv = append(recEnv, k+"="+v)
	}
	checkRayEnv(t, "the record", recEnv, secrets, state)
	// The built-in shim, written where Ray's Python loads it by itself
	// (sys.path[0] under -m is the working dir, so the shim dir is entry 1).
	builtIn, _ := shim.Default()
	if got, err := os.ReadFile(filepath.Join(state, "shim", shim.Name)); err != nil || string(got) != string(builtIn) {
		t.Errorf("the node's %s is not the built-in shim (%d bytes, %v)", shim.Name, len(got), err)
	}
	if len(rec.SysPath) < 2 || rec.SysPath[1] != filepath.Join(state, "shim") {
		t.Errorf("Ray's sys.path %q, want the shim dir at [1]", rec.SysPath)
	}
	if rec.Imports["sitecustomize"] != true {
		t.Errorf("sitecustomize is not importable by Ray: %v", rec.Imports["sitecustomize"])
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

	// The guest API's local surface answers on STATE/agent.sock (0600).
	sock := filepath.Join(state, "agent.sock")
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("agent.sock: %v, mode %v; want a 0600 socket", err, st)
	}
	local := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	if resp, err := local.Get("http://agent/prpc/v1/Version"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /prpc/v1/Version on agent.sock: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// 10. Budget: the agent's resident memory while it supervises.
	rss := procStatus(agentPID, "VmRSS")
	t.Logf("BUDGET agent VmRSS while supervising: %s (peak VmHWM %s; budget 20 MiB)", rss, procStatus(agentPID, "VmHWM"))
	if kb, err := strconv.Atoi(strings.Fields(rss + " 0")[0]); err == nil && kb > 20<<10 {
		t.Errorf("agent VmRSS %d kB over the 20 MiB budget", kb)
	}

	// 11. SIGTERM to the agent: Ray gets SIGTERM, its exit code comes back.
	if err := syscall.Kill(agentPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := f.wait(60 * time.Second); code != rayExitCode {
		t.Errorf("sandbox exit code %d (%v), want Ray's %d", code, f.exitErr, rayExitCode)
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
	assertNoSecrets(t, f)
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
		"E2E_PLAIN": "kept", "RAY_NODE_TYPE_NAME": "cpu",
	}
	if !strings.HasPrefix(has["RAY_CLOUD_INSTANCE_ID"], "c-") {
		t.Errorf("%s: RAY_CLOUD_INSTANCE_ID=%q, want the candidate id", where, has["RAY_CLOUD_INSTANCE_ID"])
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

// expectedArgv is docs/protocol.md §9's command line written out by hand from the
// Ray parameters the agent stored (bundle.json), after the Python.
func expectedArgv(t *testing.T, state, tempDir string) []string {
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
	// The sandbox's CPUs (same cgroup and affinity as this test): the agent
	// lowers the head's cap to them.
	cpus := raylaunch.RayCPUs(r.NumCPUs, raylaunch.ContainerCPUs(raylaunch.CPUConfig{}))
	res, _ := json.Marshal(r.Resources)
	argv := []string{"-m", "ray.scripts.scripts", "start", "--block",
		"--address=" + r.HeadAddress, "--node-ip-address=" + r.NodeIPAddress,
		"--node-manager-port=" + strconv.Itoa(r.NodeManagerPort),
		"--object-manager-port=" + strconv.Itoa(r.ObjectManagerPort),
		"--runtime-env-agent-port=" + strconv.Itoa(r.RuntimeEnvAgentPort),
		"--dashboard-agent-grpc-port=" + strconv.Itoa(r.DashboardAgentGRPCPort),
		"--dashboard-agent-listen-port=" + strconv.Itoa(r.DashboardAgentListenPort),
		"--metrics-export-port=" + strconv.Itoa(r.MetricsExportPort),
		"--worker-port-list=" + strings.Join(workers, ","),
		"--num-gpus=" + strconv.Itoa(r.NumGPUs), "--num-cpus=" + strconv.Itoa(cpus),
		"--temp-dir=" + tempDir, "--node-name=" + r.NodeName,
		"--resources=" + string(res)}
	if r.NodeName != instanceID || r.NumCPUs != 56-4 {
		t.Errorf("bundle ray.node_name %q num_cpus %d, want %s and 52 (56 worker ports minus 4: the eighth port is the mesh's)", r.NodeName, r.NumCPUs, instanceID)
	}
	if len(r.Labels) > 0 { // Ray's own k=v,… form (JSON is deprecated since 2.52)
		keys := make([]string, 0, len(r.Labels))
		for k := range r.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + r.Labels[k]
		}
		argv = append(argv, "--labels="+strings.Join(pairs, ","))
	}
	return argv
}

// checkTempDir finds Ray's --temp-dir: STATE/ray when that is short
// enough for Ray's socket paths, else a fresh short dir; 0700 either way.
func checkTempDir(t *testing.T, argv []string, state string) string {
	t.Helper()
	dir := ""
	for _, a := range argv {
		if v, ok := strings.CutPrefix(a, "--temp-dir="); ok {
			dir = v
		}
	}
	short := filepath.Join(state, "ray")
	if len(short) <= raylaunch.MaxTempDirLen && dir != short || len(dir) > raylaunch.MaxTempDirLen || dir == "" {
		t.Errorf("--temp-dir=%q: want %s when it fits %d bytes, else a shorter dir", dir, short, raylaunch.MaxTempDirLen)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("ray temp dir %s: %v %v, want a 0700 dir", dir, st, err)
	}
	return dir
}

type fakeRecord struct {
	Argv       []string          `json:"argv"`
	OrigArgv   []string          `json:"orig_argv"`
	Executable string            `json:"executable"`
	Env        map[string]string `json:"env"`
	PID        int               `json:"pid"`
	PPID       int               `json:"ppid"`
	Imports    map[string]any    `json:"imports"`
	SysPath    []string          `json:"sys_path"`
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

// waitRecord waits for fakeray's record: Ray runs.
func (f *flow) waitRecord(limit time.Duration) fakeRecord {
	f.t.Helper()
	if !rvtest.Until(limit, func() bool {
		select {
		case err := <-f.exited:
			f.exitSeen, f.exitErr = true, err
			f.t.Fatalf("the candidate exited before Ray started: %v", err)
		default:
		}
		_, err := os.Stat(f.record)
		return err == nil
	}) {
		f.t.Fatalf("no fakeray record after %v", limit)
	}
	return readRecord(f.t, f.record)
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
