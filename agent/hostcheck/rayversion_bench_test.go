package hostcheck

import (
	"context"
	"os/exec"
	"testing"
)

// BenchmarkProbeRay is the version probe against a stand-in ray package;
// BenchmarkPythonBare, the same interpreter doing nothing, is its floor
// (run both in one invocation and compare: the probe should cost about
// one Python start).
func BenchmarkProbeRay(b *testing.B) {
	py := python3(b)
	env := []string{"PYTHONPATH=" + fakeRayPkg(b, "__version__ = '2.53.0'\n")}
	for b.Loop() {
		if v, err := ProbeRay(context.Background(), RayProbe{Python: py, Env: env}); err != nil || v.Ray != "2.53.0" {
			b.Fatal(v, err)
		}
	}
}

func BenchmarkPythonBare(b *testing.B) {
	py := python3(b)
	for b.Loop() {
		cmd := exec.Command(py, "-c", "pass")
		cmd.Env = []string{}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
