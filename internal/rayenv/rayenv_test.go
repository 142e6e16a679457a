package rayenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rayenv"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// A build that fails (no Ray among the wheels) says which step failed and
// leaves nothing that looks finished: the next Ensure builds again.
func TestEnsureFailureLeavesNoFinishedVenv(t *testing.T) {
	py, err := rayenv.FindPython(context.Background())
	if err != nil {
		rvtest.Need(t, err.Error())
		return
	}
	dir := filepath.Join(t.TempDir(), "2.60.0")
	empty := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = rayenv.Ensure(ctx, rayenv.Config{Dir: dir, Version: "2.60.0", Wheels: empty, Python: py})
	if err == nil || !strings.Contains(err.Error(), "pip install ray[default]==2.60.0 from "+empty) {
		t.Fatalf("Ensure with no wheels = %v, want a pip install error naming the folder", err)
	}
	if rayenv.Ready(dir, "2.60.0") {
		t.Fatal("a failed build is marked ready")
	}
	if _, err := os.Stat(filepath.Join(dir, rayenv.MarkFile)); err == nil {
		t.Fatal("a failed build left the completion mark")
	}
}

// Bad input is refused before anything is made.
func TestEnsureRefusesBadInput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v")
	for _, c := range []struct {
		cfg  rayenv.Config
		want string
	}{
		{rayenv.Config{Dir: dir, Version: "2.60"}, "not X.Y.Z"},
		{rayenv.Config{Dir: dir, Version: "2.60.0; rm -rf /"}, "not X.Y.Z"},
		{rayenv.Config{Dir: dir, Version: "2.60.0", Wheels: filepath.Join(dir, "missing")}, "not a directory"},
	} {
		if _, err := rayenv.Ensure(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rayenv.Ensure(%+v) = %v, want %q", c.cfg, err, c.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("rayenv.Ensure(%+v) made %s", c.cfg, dir)
		}
	}
}

// Ready reads the mark Ensure writes last: only a finished venv of that
// version is ready.
func TestReady(t *testing.T) {
	dir := t.TempDir()
	if rayenv.Ready(dir, "2.60.0") {
		t.Fatal("empty dir ready")
	}
	if err := os.WriteFile(filepath.Join(dir, rayenv.MarkFile), []byte("ray 2.60.0\nray-2.60.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !rayenv.Ready(dir, "2.60.0") || rayenv.Ready(dir, "2.52.1") || rayenv.Ready(dir, "2.60") {
		t.Fatal("Ready does not match the mark's version exactly")
	}
}
