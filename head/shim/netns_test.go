package shim

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// vastNet is the network of a vast rental, in a namespace the test makes:
// the container's own IP 10.200.0.2 on a veth whose peer stays in the same
// namespace (nothing leaves), a route toward the head 10.200.0.1, and the
// node (public) IP 203.0.113.7 on no interface, with no route to it: binds
// to it fail with EADDRNOTAVAIL and connects with ENETUNREACH, as on vast
// without hairpin NAT.
const vastNet = `ip link set lo up &&
ip link add v0 type veth peer name v1 &&
ip addr add 10.200.0.2/24 dev v0 && ip link set v0 up && ip link set v1 up &&
exec "$@"`

// rayStartArgv is the agent's command (docs/protocol.md §9) with fixed ports: the
// namespace is the test's own, so they cannot clash.
var rayStartArgv = []string{"python3", "-m", "ray.scripts.scripts", "start", "--block",
	"--address=10.200.0.1:6379", "--node-ip-address=203.0.113.7",
	"--node-manager-port=31001", "--object-manager-port=31002", "--runtime-env-agent-port=31003",
	"--dashboard-agent-grpc-port=31004", "--dashboard-agent-listen-port=31005", "--metrics-export-port=31006",
	"--worker-port-list=31010,31011,31012", "--num-gpus=0", "--num-cpus=1", "--resources={}"}

func needRoot(t *testing.T, tools ...string) { t.Helper(); rvtest.NeedRoot(t, tools...) }

// TestVastNetns runs miniray (Ray's binds and connects: runtime-env agent,
// dashboard agent, raylet, core worker in C and Python) in vastNet. Without
// the shim it dies as real Ray does on vast; with it every step works; with
// the Python layer only, the C core worker still cannot reach the raylet.
func TestVastNetns(t *testing.T) {
	needRoot(t, "unshare", "ip")
	needPython(t)
	lib, probe := buildNative(t, "native"), buildProbe(t)
	miniray, err := filepath.Abs("testdata/miniray")
	if err != nil {
		t.Fatal(err)
	}
	withLib, noLib := writeShim(t, lib), writeShim(t)
	// The shim head really ships (build.sh's library), when there is one.
	builtIn := t.TempDir()
	content, libs := Default()
	if err := os.WriteFile(filepath.Join(builtIn, Name), content, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, pythonPath string
		wantCode         int
		want             map[string]string
	}{
		{"without the shim", miniray, 1, map[string]string{
			"raylet":            "0 ok 0.0.0.0:31001 -:0",
			"runtime_env_agent": "err EADDRNOTAVAIL", "dashboard_agent": "err EADDRNOTAVAIL",
			"core_worker": "0 err ENETUNREACH", "core_worker_v6": "0 err ENETUNREACH",
			"python_worker": "err ENETUNREACH", "foreign_port": "err ENETUNREACH"}},
		{"with the shim", withLib + ":" + miniray, 0, map[string]string{
			"raylet":            "0 ok 0.0.0.0:31001 -:0",
			"runtime_env_agent": "ok 10.200.0.2:31003",
			"dashboard_agent":   "ok 127.0.0.2:31005; ok 127.0.0.1:31005", // its HTTP port on loopback: vast would forward it
			"core_worker":       "0 ok 10.200.0.2:* 10.200.0.2:31001",
			"core_worker_v6":    "0 ok ::ffff:10.200.0.2:* ::ffff:10.200.0.2:31001",
			"python_worker":     "ok 10.200.0.2:*",
			"foreign_port":      "err ENETUNREACH"}},
		{"with the Python layer only", noLib + ":" + miniray, 1, map[string]string{
			"raylet":            "0 ok 0.0.0.0:31001 -:0",
			"runtime_env_agent": "ok 10.200.0.2:31003",
			"dashboard_agent":   "ok 127.0.0.2:31005; ok 127.0.0.1:31005", // its HTTP port on loopback: vast would forward it
			"core_worker":       "0 err ENETUNREACH", "core_worker_v6": "0 err ENETUNREACH",
			"python_worker": "ok 10.200.0.2:*", "foreign_port": "err ENETUNREACH"}},
	}
	if len(libs) > 0 {
		tests = append(tests, tests[1])
		tests[3].name, tests[3].pythonPath = "with the built-in shim", builtIn+":"+miniray
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, got, stderr := runInVastNet(t, rayStartArgv, "PYTHONPATH="+tt.pythonPath,
				"MINIRAY_SOCKPROBE="+probe, "MINIRAY_FOREIGN_PORT=31999")
			if code != tt.wantCode {
				t.Errorf("ray start exited %d, want %d\nstderr: %s", code, tt.wantCode, stderr)
			}
			for step, want := range tt.want {
				if g := ephemeral.ReplaceAllString(got[step], ":*"); g != want {
					t.Errorf("%s: got %q, want %q", step, got[step], want)
				}
			}
		})
	}
}

// ephemeral matches a port of the kernel's ephemeral range (32768 up).
var ephemeral = regexp.MustCompile(`:(3[2-9]\d{3}|[4-6]\d{4})\b`)

// runInVastNet runs argv in a fresh vastNet namespace and returns its exit
// code, the JSON line it printed (step → result) and its stderr.
func runInVastNet(t *testing.T, argv []string, env ...string) (int, map[string]string, string) {
	t.Helper()
	cmd := exec.Command("unshare", append([]string{"-n", "sh", "-c", vastNet, "sh"}, argv...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1"}, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run %q: %v", argv, err)
	}
	got := map[string]string{}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("ray start printed no result (%v): stdout %q\nstderr: %s", err, stdout.String(), stderr.String())
	}
	t.Logf("exit %d: %s\nstderr: %s", code, fmt.Sprint(got), stderr.String())
	return code, got, stderr.String()
}
