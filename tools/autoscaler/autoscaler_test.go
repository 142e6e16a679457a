package autoscaler

import (
	"os"
	"os/exec"
	"testing"
)

// TestPython runs the module's unittest suite (stub Ray base class, fake
// admin API on a Unix socket).
func TestPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 not found")
		}
		t.Skip("SKIPPING: python3 not found")
	}
	cmd := exec.Command(py, "-B", "-m", "unittest", "-v", "test_rayvast_autoscaler")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python unittest: %v", err)
	}
}
