package rvtest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNotInBinaries proves no shipped binary links test support (this
// package, the fakes the head's and the agent's tests use, and the
// standard library's test packages: a detour through httptest in the
// head once linked it).
func TestNotInBinaries(t *testing.T) {
	testOnly := []string{"internal/rvtest", "head/internal/fakeagent", "agent/internal/enrolltest"}
	stdTestOnly := []string{"testing", "net/http/httptest"}
	for _, pkg := range []string{"./head", "./agent", "./tools/guesttoken", "./tools/fakevast"} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = ModuleRoot(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, d := range strings.Fields(string(out)) {
			for _, bad := range stdTestOnly {
				if d == bad {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
			for _, bad := range testOnly {
				if d == "github.com/rayvast/rayvast/"+bad {
					t.Errorf("%s depends on test support %s", pkg, d)
				}
			}
		}
	}
}
