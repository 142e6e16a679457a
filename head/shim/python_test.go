package shim

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPythonLayer runs the Python layer's unit tests
// (testdata/test_sitecustomize.py) against the assembled shim carrying a
// freshly built native library, and against one without it.
func TestPythonLayer(t *testing.T) {
	needPython(t)
	withLib, noLib := writeShim(t, buildNative(t, "native")), writeShim(t)
	miniray, err := filepath.Abs("testdata/miniray")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-m", "unittest", "-v", "test_sitecustomize")
	cmd.Dir = "testdata"
	// PYTHONPATH: the shim, as the agent puts it, so the test process itself
	// starts through it (and imports the same module the tests call).
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PYTHONPATH=" + withLib, "PYTHONDONTWRITEBYTECODE=1",
		"SHIM_DIR=" + withLib, "SHIM_DIR_NOLIB=" + noLib, "MINIRAY=" + miniray}
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python unit tests: %v", err)
	}
}
