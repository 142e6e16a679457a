package autoscaler

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// python finds python3 with the modules the tests import; it skips loudly,
// or fails when CI=true (.ci/run installs them).
func python(t *testing.T, modules ...string) string {
	t.Helper()
	var err error
	// python3 on PATH first (it may be a pyenv one with the modules), then
	// Debian's, where .ci/run's apt-get puts python3-yaml and -jsonschema.
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		var py string
		if py, err = exec.LookPath(name); err != nil {
			continue
		}
		if err = importsAll(py, modules); err == nil {
			return py
		}
	}
	rvtest.Need(t, fmt.Sprintf("python3 with %v: %v", modules, err))
	return ""
}

func importsAll(py string, modules []string) error {
	for _, m := range modules {
		if out, err := exec.Command(py, "-c", "import "+m).CombinedOutput(); err != nil {
			return &missing{m + ": " + strings.TrimSpace(string(out))}
		}
	}
	return nil
}

type missing struct{ s string }

func (m *missing) Error() string { return m.s }

func unittest(t *testing.T, py string, env []string, module string) {
	t.Helper()
	cmd := exec.Command(py, "-B", "-m", "unittest", "-v", module)
	cmd.Env = append(append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1"), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python unittest %s: %v", module, err)
	}
	if strings.Contains(string(out), "skipped") {
		t.Fatalf("python unittest %s skipped tests", module)
	}
}

// TestPython runs the module's unittest suite (stub Ray base class, fake
// admin API on a Unix socket).
func TestPython(t *testing.T) {
	unittest(t, python(t), nil, "test_rayvast_autoscaler")
}

// TestExampleYAML validates example.yaml against Ray's own schema and the
// keys Ray's v1 autoscaler indexes (check_config.py).
func TestExampleYAML(t *testing.T) {
	unittest(t, python(t, "yaml", "jsonschema"), nil, "test_check_config")
}

// TestWithHead drives the plugin the way Ray's v1 StandardAutoscaler and v2
// NodeProviderAdapter call it, against a real `head serve --provider none`.
func TestWithHead(t *testing.T) {
	py := python(t)
	dir := t.TempDir()
	head := rvtest.Build(t, dir, "./head")
	state := filepath.Join(dir, "state")
	if out, err := exec.Command(head, "init", "--state", state, "--ip", "127.0.0.1", "--cluster", "withhead").CombinedOutput(); err != nil {
		t.Fatalf("head init: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"cluster":"withhead","ray":{"head_address":"127.0.0.1:6379"},
		"node_types":{"gpu1":{"gpus":1,"max_workers":4,"resources":{},"labels":{"gpu":"4090"}}},
		"guest_api":{},"provider":{"kind":"none"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Any file serves as the agent: nothing downloads it here.
	serve := exec.CommandContext(ctx, head, "serve", "--state", state, "--config", cfg, "--agent", head,
		"--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0", "--firewall", "off")
	log := &strings.Builder{}
	serve.Stdout, serve.Stderr = log, log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = serve.Wait() }()
	sock := filepath.Join(state, statedir.AdminSocket)
	rvtest.WaitFor(t, 30*time.Second, func() error {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return fmt.Errorf("head serve did not listen on %s: %w", sock, err)
		}
		return c.Close()
	})
	unittest(t, py, []string{"RAYVAST_TEST_ADMIN_SOCKET=" + sock}, "test_with_head")
}

// TestWithRay runs test_with_ray.py under the newest real Ray's Python:
// the plugin's tag names and statuses are those of Ray's
// ray.autoscaler.tags, with Ray and without it, and a create the head
// refuses reaches Ray as its NodeLaunchException.
func TestWithRay(t *testing.T) {
	unittest(t, rvtest.RayPython(t, rvtest.RayNewest), nil, "test_with_ray")
}
