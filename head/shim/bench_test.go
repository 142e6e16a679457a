package shim

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkRayStart times a `ray start` process (miniray, dump mode) from
// exec to exit, medians per variant: bare (no shim: the reference), with
// the shim where the node IP is local (it learns and does nothing), and
// where it is not (it also writes the native library and patches sockets).
//
//	go test -run '^$' -bench RayStart ./head/shim
func BenchmarkRayStart(b *testing.B) {
	// The interpreter itself, not a wrapper script (pyenv's shims fork a
	// shell): its start is what the figure is about.
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		b.Skipf("python3: %v", err)
	}
	python := strings.TrimSpace(string(out))
	// A copy, so Python may cache bytecode as on a node (the agent's shim
	// dir is Ray's to write) without writing into the source tree.
	miniray := filepath.Join(b.TempDir(), "miniray")
	if err := os.CopyFS(miniray, os.DirFS("testdata/miniray")); err != nil {
		b.Fatal(err)
	}
	shimDir := b.TempDir()
	content, libs := Default()
	if err := os.WriteFile(filepath.Join(shimDir, Name), content, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("native libraries in the shim: %q", libs)
	variants := []struct{ name, pythonPath, node string }{
		{"bare", miniray, "203.0.113.7"},
		{"local", shimDir + ":" + miniray, "127.0.0.2"},
		{"nat", shimDir + ":" + miniray, "203.0.113.7"},
	}
	// Interleaved, so load from other work hits every variant alike; CPU
	// time (user+sys) is reported beside wall time, being less load-bound.
	wall, cpu := make([][]time.Duration, len(variants)), make([][]time.Duration, len(variants))
	for i := 0; i < b.N; i++ {
		for v, c := range variants {
			cmd := exec.Command(python, "-m", "ray.scripts.scripts", "start", "--block",
				"--address=127.0.0.1:6379", "--node-ip-address="+c.node, "--node-manager-port=31001",
				"--runtime-env-agent-port=31003", "--worker-port-list=31010,31011")
			cmd.Env = []string{"PYTHONPATH=" + c.pythonPath, "MINIRAY_MODE=dump"}
			t0 := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%s: %v\n%s", c.name, err, out)
			}
			wall[v] = append(wall[v], time.Since(t0))
			cpu[v] = append(cpu[v], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		}
	}
	for v, c := range variants {
		b.ReportMetric(ms(median(wall[v])), c.name+"-wall-ms")
		b.ReportMetric(ms(median(cpu[v])), c.name+"-cpu-ms")
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
