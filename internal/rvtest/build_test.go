package rvtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildFlagsMatchBuildSh: the binaries tests run are built as
// build.sh builds the ones CI ships.
func TestBuildFlagsMatchBuildSh(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(ModuleRoot(t), "build.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "flags=(") {
			line = l
		}
	}
	want := "flags=(-trimpath -buildvcs=false -ldflags='-s -w -buildid=')"
	if line != want {
		t.Fatalf("build.sh has %q; rvtest.BuildFlags are %q: make them agree", line, BuildFlags)
	}
	if got := strings.Join(BuildFlags, " "); got != "-trimpath -buildvcs=false -ldflags=-s -w -buildid=" {
		t.Errorf("BuildFlags = %q, want build.sh's", got)
	}
	if !strings.Contains(string(b), "export CGO_ENABLED=0") {
		t.Error("build.sh no longer exports CGO_ENABLED=0, which Build sets")
	}
}

// TestBuild builds a real binary and finds it where Build says.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := Build(t, t.TempDir(), "./tools/guesttoken")
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("built %s: %v %v", bin, fi, err)
	}
}
