package rvtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Need is the gate of tests that need something the machine may lack
// (root, a tool, Docker): when why is empty it does nothing; otherwise it
// skips loudly, or fails when CI=true, because CI must run every test and
// a skip there would let a broken feature pass.
func Need(t TB, why string) {
	t.Helper()
	if why == "" {
		return
	}
	if InCI() {
		t.Fatalf("CI=true and %s cannot run: %s", t.Name(), why)
		return
	}
	t.Skipf("SKIPPING %s: %s", t.Name(), why)
}

// InCI reports CI=true: every test must run, none may skip. For a
// TestMain, which has no t to pass Need.
func InCI() bool { return os.Getenv("CI") == "true" }

// NeedRoot passes Need the first of: not root, a tool missing from PATH.
func NeedRoot(t TB, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Need(t, fmt.Sprintf("needs root (euid %d)", os.Geteuid()))
		return
	}
	NeedTools(t, tools...)
}

// NeedTools passes Need the tools missing from PATH.
func NeedTools(t TB, tools ...string) {
	t.Helper()
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		Need(t, "not installed: "+strings.Join(missing, ", "))
	}
}

// TB is the part of testing.TB the gate uses (a test of the gate passes a
// recorder).
type TB interface {
	Helper()
	Name() string
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}
