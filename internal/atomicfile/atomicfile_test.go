package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteReplaces: the new content and mode replace the old file, and
// no temp file is left beside it.
func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o644, 0o600} {
		if err := Write(path, []byte("new"), mode); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		fi, _ := os.Stat(path)
		if err != nil || string(b) != "new" || fi.Mode().Perm() != mode {
			t.Errorf("after Write(%o): %q %v %v, want \"new\" mode %o", mode, b, fi.Mode(), err, mode)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("dir holds %d entries, want only state.json: %v", len(ents), ents)
	}
}

// TestWriteFailureLeavesOld: when the rename cannot happen (the target is
// a directory) the old content stays, no temp file is left, and the error
// names the path.
func TestWriteFailureLeavesOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "target")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := Write(path, []byte("x"), 0o600)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Write over a non-empty dir: %v, want an error naming %s", err, path)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("a temp file was left: %v", ents)
	}
}

// TestWriteMissingDir: no directory, an error, nothing created.
func TestWriteMissingDir(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "no", "such"), []byte("x"), 0o600); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}
