package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/internal/enrolltest"
	"github.com/rayvast/rayvast/agent/raylaunch"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestRunRayArgvAndEnv runs the agent binary through enrollment to Ray's
// start against a fake head that answers a bundle, with the stand-in Ray
// of test/fakeray, and checks what the enrollment flow really built: the
// versions in the enroll request (from the found Python), the exact docs/protocol.md
// §9 argv (--num-cpus, --temp-dir, --node-name; no empty --labels) and
// Ray's identity env.
func TestRunRayArgvAndEnv(t *testing.T) {
	python := pythonExe(t)
	_, file, _, _ := runtime.Caller(0)
	fakeray := filepath.Join(filepath.Dir(file), "..", "test", "fakeray")
	wantRay := pyOut(t, python, fakeray, "import ray; print(ray.__version__)")
	wantPy := pyOut(t, python, fakeray, "import platform; print(platform.python_version())")

	var mu sync.Mutex
	var got wire.EnrollRequest
	var h *fakeHead
	h = newFakeHead(t, func(w http.ResponseWriter, r *http.Request) {
		var req wire.EnrollRequest
		if err := wire.Decode(r.Body, wire.MaxBody, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = req
		mu.Unlock()
		resp := enrolltest.Response(t, h.ca, req.InstanceID, "127.0.0.1", req.Ports)
		resp.Ray.Labels = nil // no labels: no --labels
		json.NewEncoder(w).Encode(resp)
	})
	state, err := os.MkdirTemp("/tmp", "rvs") // short: STATE/ray is the temp dir
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	record := filepath.Join(t.TempDir(), "record.json")
	cmd, out := agentCmd(t, h, h.ca.Fingerprint())
	for i, kv := range cmd.Env {
		if strings.HasPrefix(kv, wire.EnvState+"=") {
			cmd.Env[i] = wire.EnvState + "=" + state
		}
	}
	cmd.Env = append(cmd.Env, wire.EnvPython+"="+python, "PYTHONPATH="+fakeray, "FAKERAY_RECORD="+record,
		"RAY_CLOUD_INSTANCE_ID=inherited-must-not-win")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	rec := waitFakeRay(t, record, out)
	cmd.Process.Signal(syscall.SIGTERM)
	exitCode(t, cmd, 30*time.Second)

	mu.Lock()
	req := got
	mu.Unlock()
	if req.RayVersion != wantRay || req.PythonVersion != wantPy || req.RayVersion == "" || req.PythonVersion == "" {
		t.Errorf("enroll request ray_version %q python_version %q, want %q %q", req.RayVersion, req.PythonVersion, wantRay, wantPy)
	}
	if req.GPUModels == nil {
		t.Error("gpu_models is null, want a list")
	}

	resp := enrolltest.Response(t, h.ca, "run-test", "127.0.0.1", req.Ports)
	r := resp.Ray
	workers := make([]string, len(r.WorkerPorts))
	for i, p := range r.WorkerPorts {
		workers[i] = strconv.Itoa(p)
	}
	cpus := raylaunch.RayCPUs(r.NumCPUs, raylaunch.ContainerCPUs(raylaunch.CPUConfig{}))
	want := []string{"-m", "ray.scripts.scripts", "start", "--block",
		"--address=" + r.HeadAddress, "--node-ip-address=127.0.0.1",
		"--node-manager-port=" + strconv.Itoa(r.NodeManagerPort),
		"--object-manager-port=" + strconv.Itoa(r.ObjectManagerPort),
		"--runtime-env-agent-port=" + strconv.Itoa(r.RuntimeEnvAgentPort),
		"--dashboard-agent-grpc-port=" + strconv.Itoa(r.DashboardAgentGRPCPort),
		"--dashboard-agent-listen-port=" + strconv.Itoa(r.DashboardAgentListenPort),
		"--metrics-export-port=" + strconv.Itoa(r.MetricsExportPort),
		"--worker-port-list=" + strings.Join(workers, ","),
		"--num-gpus=1", "--num-cpus=" + strconv.Itoa(cpus), "--temp-dir=" + filepath.Join(state, "ray"),
		"--node-name=run-test", `--resources={"a100":1}`}
	if len(rec.OrigArgv) < 1 || !slices.Equal(rec.OrigArgv[1:], want) {
		t.Errorf("ray argv:\ngot  %q\nwant %q", rec.OrigArgv, want)
	}
	if cpus < 1 || cpus > r.NumCPUs {
		t.Errorf("--num-cpus=%d outside 1..%d", cpus, r.NumCPUs)
	}
	if st, err := os.Stat(filepath.Join(state, "ray")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("temp dir: %v %v, want 0700", st, err)
	}
	for k, v := range map[string]string{"RAY_CLOUD_INSTANCE_ID": resp.CandidateID, "RAY_NODE_TYPE_NAME": resp.NodeType} {
		if rec.Env[k] != v {
			t.Errorf("ray env %s=%q, want %q", k, rec.Env[k], v)
		}
	}
	if strings.Contains(out.String(), testToken) {
		t.Error("the join token was printed")
	}
}

type rayRecord struct {
	OrigArgv []string          `json:"orig_argv"`
	Env      map[string]string `json:"env"`
}

func waitFakeRay(t *testing.T, path string, out interface{ String() string }) rayRecord {
	t.Helper()
	var r rayRecord
	if !rvtest.Until(60*time.Second, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(b, &r) == nil
	}) {
		t.Fatalf("no fakeray record after 60s; agent output:\n%s", out.String())
	}
	return r
}

// pythonExe is the real interpreter behind python3 (not a pyenv shim).
func pythonExe(t *testing.T) string {
	t.Helper()
	rvtest.NeedTools(t, "python3")
	return pyOut(t, "python3", "", "import os, sys; print(os.path.realpath(sys.executable))")
}

func pyOut(t *testing.T, python, pythonPath, code string) string {
	t.Helper()
	cmd := exec.Command(python, "-c", code)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s -c %q: %v", python, code, err)
	}
	return strings.TrimSpace(string(b))
}
