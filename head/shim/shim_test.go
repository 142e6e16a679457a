package shim

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestAssembleCarriesLibraries: the libraries come back byte for byte
// from the Python file's NATIVE (as the node's Python decodes them).
func TestAssembleCarriesLibraries(t *testing.T) {
	needPython(t)
	libs := [][]byte{bytes.Repeat([]byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 300), []byte("second")}
	content, err := Assemble(libs)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shimcopy.py"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	code := "import base64, shimcopy\nfor b in shimcopy.NATIVE: print(base64.b64encode(base64.b64decode(b)).decode())"
	cmd := exec.Command("python3", "-S", "-c", code)
	cmd.Env, cmd.Dir = []string{"PYTHONPATH=" + dir}, dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var want []string
	for _, l := range libs {
		want = append(want, base64.StdEncoding.EncodeToString(l))
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("NATIVE decodes to %q, want %q", got, want)
	}
}

// TestDefault: the built-in shim is sitecustomize.py; under CI (after
// build.sh) it must carry the native library build.sh made.
func TestDefault(t *testing.T) {
	content, libs := Default()
	if w := Wire(content); w.Name != "sitecustomize.py" {
		t.Errorf("wire name %q", w.Name)
	}
	if bytes.Contains(content, []byte(marker)) {
		t.Error("the built-in shim still has its marker line")
	}
	if len(libs) == 0 {
		rvtest.Need(t, "no native library embedded in head/shim/native/lib (run ./build.sh first): the shim is the Python layer only")
	}
	for _, l := range libs {
		if !strings.HasPrefix(l, "natshim-") {
			t.Errorf("embedded %q", l)
		}
	}
}
