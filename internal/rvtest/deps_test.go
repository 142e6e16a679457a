package rvtest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNotInBinaries proves no shipped binary links test support (this
// package and the fakes the head's and the agent's tests use).
func TestNotInBinaries(t *testing.T) {
	testOnly := []string{"internal/rvtest", "head/internal/fakeagent", "agent/internal/enrolltest"}
	for _, pkg := range []string{"./head", "./agent", "./tools/guesttoken", "./tools/fakevast"} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = ModuleRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, d := range strings.Fields(string(out)) {
			for _, bad := range testOnly {
				if d == "github.com/rayvast/rayvast/"+bad {
					t.Errorf("%s depends on test support %s", pkg, d)
				}
			}
		}
	}
}
