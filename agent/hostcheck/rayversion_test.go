package hostcheck

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// fakeRayPkg makes a PYTHONPATH dir whose ray package has version v and
// writes the environment it was imported in to envFile.
func fakeRayPkg(t testing.TB, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ray"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ray", "__init__.py"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func python3(t testing.TB) string {
	t.Helper()
	rvtest.NeedTools(t, "python3")
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	// The real interpreter, not a pyenv shim script that adds its own env.
	out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func TestProbeRay(t *testing.T) {
	py := python3(t)
	envFile := filepath.Join(t.TempDir(), "env")
	for _, c := range []struct {
		name     string
		init     string // ray/__init__.py; "" = no ray package
		wantRay  string
		wantErr  string
		extraEnv []string
	}{
		{"a release", "__version__ = '2.53.0'\n", "2.53.0", "", nil},
		{"prints to stdout on import", "print('RAYVAST-VERSIONS 9.9.9 9.9.9 fake')\nprint('hello from ray')\n__version__ = '2.52.1'\n", "2.52.1", "", nil},
		{"no ray", "", "", "No module named", nil},
		{"ray import fails", "raise RuntimeError('broken wheel')\n", "", "broken wheel", nil},
		{"version with spaces is unknown", "__version__ = '2.53 evil'\n", "", "no version line", nil},
		{"env is what we pass", "import os\nopen(" + pyQuote(envFile) + ", 'w').write('\\n'.join(sorted(os.environ)))\n__version__ = '2.54.0'\n", "2.54.0", "", []string{"ONLY_THIS=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := []string{"PATH=" + os.Getenv("PATH")}
			if c.init != "" {
				env = append(env, "PYTHONPATH="+fakeRayPkg(t, c.init))
			}
			env = append(env, c.extraEnv...)
			v, err := ProbeRay(context.Background(), RayProbe{Python: py, Env: env, Timeout: 20 * time.Second})
			if v.Ray != c.wantRay {
				t.Errorf("ray version %q, want %q", v.Ray, c.wantRay)
			}
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("err = %v, want %q", err, c.wantErr)
			}
			if c.wantErr != "no version line" && (v.Python == "" || !strings.HasPrefix(v.Python, "3.")) {
				t.Errorf("python version %q, want 3.x", v.Python)
			}
		})
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Split(string(b), "\n") {
		switch name {
		case "PATH", "PYTHONPATH", "ONLY_THIS", "LC_CTYPE": // LC_CTYPE: Python's own coercion
		default:
			t.Errorf("the probe ran with %s, not given to it", name)
		}
	}
}

func TestProbeRayTimeoutAndMissing(t *testing.T) {
	py := python3(t)
	dir := fakeRayPkg(t, "import time\ntime.sleep(30)\n")
	start := time.Now()
	_, err := ProbeRay(context.Background(), RayProbe{Python: py, Env: []string{"PYTHONPATH=" + dir}, Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("probe took %v past its 300ms timeout", d)
	}
	// A nil Env is an empty env, never the agent's own: the ray package on
	// this process's PYTHONPATH is not found.
	t.Setenv("PYTHONPATH", fakeRayPkg(t, "__version__ = '2.53.0'\n"))
	if v, _ := ProbeRay(context.Background(), RayProbe{Python: py}); v.Ray != "" {
		t.Errorf("nil Env inherited the agent's environment: found ray %s", v.Ray)
	}
	if _, err := ProbeRay(context.Background(), RayProbe{Python: filepath.Join(t.TempDir(), "nope")}); err == nil {
		t.Error("a missing python gave no error")
	}
}

func pyQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "\\'") + "'" }
