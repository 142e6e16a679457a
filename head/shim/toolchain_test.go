package shim

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// needGCC: the native layer is built with gcc (apt: gcc libc6-dev).
func needGCC(t *testing.T) { t.Helper(); rvtest.NeedTools(t, "gcc") }

// buildNative runs native/build.sh (the recipe build.sh uses) from srcDir
// into a fresh dir and returns the library's path.
func buildNative(t *testing.T, srcDir string) string {
	t.Helper()
	needGCC(t)
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(srcDir, "build.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("native/build.sh: %v\n%s", err, b)
	}
	libs, _ := filepath.Glob(filepath.Join(out, "natshim-*.so"))
	if len(libs) != 1 {
		t.Fatalf("native/build.sh made %q, want one natshim-<arch>.so", libs)
	}
	return libs[0]
}

// buildProbe compiles testdata/sockprobe.c, the native stand-in for Ray's
// raylet and core worker.
func buildProbe(t *testing.T) string {
	t.Helper()
	needGCC(t)
	out := filepath.Join(t.TempDir(), "sockprobe")
	if b, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-o", out, "testdata/sockprobe.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc sockprobe: %v\n%s", err, b)
	}
	return out
}

// writeShim assembles sitecustomize.py with libs into a fresh dir (the
// agent's shim dir) and returns the dir.
func writeShim(t *testing.T, libs ...string) string {
	t.Helper()
	var native [][]byte
	for _, l := range libs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		native = append(native, b)
	}
	content, err := Assemble(native)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, Name), content, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func needPython(t *testing.T) { t.Helper(); rvtest.NeedTools(t, "python3") }
