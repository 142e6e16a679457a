package rvtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildFlags are build.sh's flags (a test checks the two agree): a
// reproducible build, so a test runs the bytes CI ships.
var BuildFlags = []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid="}

// Build builds the main package pkg (relative to the module root, e.g.
// "./agent") into dir as build.sh does, static with CGO_ENABLED=0, and
// returns the binary's path (dir/last element of pkg).
func Build(t testing.TB, dir, pkg string) string {
	t.Helper()
	bin, err := BuildErr(dir, pkg)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildErr is Build for callers without a t (a TestMain, a sync.Once
// shared by tests).
func BuildErr(dir, pkg string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	args := append(append([]string{"build"}, BuildFlags...), "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// ModuleRoot is the directory of the module's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func moduleRoot() (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("go", "env", "GOMOD")
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	mod := strings.TrimSpace(string(b))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: %q %v %s", mod, err, stderr.String())
	}
	return filepath.Dir(mod), nil
}
