package rvtest

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// recorder is a TB that notes what the gate did instead of stopping.
type recorder struct{ fatal, skip string }

func (r *recorder) Helper()                      {}
func (r *recorder) Name() string                 { return "TestX" }
func (r *recorder) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }
func (r *recorder) Skipf(f string, args ...any)  { r.skip = fmt.Sprintf(f, args...) }

// TestNeed proves the gate: nothing when nothing is missing, a loud skip
// off CI, a failure under CI=true.
func TestNeed(t *testing.T) {
	for _, tc := range []struct {
		name, ci, why string
		fatal, skip   bool
	}{
		{"nothing missing", "true", "", false, false},
		{"missing, not CI", "", "needs root", false, true},
		{"missing, CI=false", "false", "needs root", false, true},
		{"missing, CI", "true", "needs root", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			var r recorder
			Need(&r, tc.why)
			if got := r.fatal != ""; got != tc.fatal {
				t.Errorf("failed = %v (%q), want %v", got, r.fatal, tc.fatal)
			}
			if got := r.skip != ""; got != tc.skip {
				t.Errorf("skipped = %v (%q), want %v", got, r.skip, tc.skip)
			}
			for _, msg := range []string{r.fatal, r.skip} {
				if msg != "" && (!strings.Contains(msg, "TestX") || !strings.Contains(msg, tc.why)) {
					t.Errorf("message %q names neither the test nor why", msg)
				}
			}
		})
	}
}

// TestNeedTools: a tool that is not on PATH is named in the skip.
func TestNeedTools(t *testing.T) {
	t.Setenv("CI", "")
	var r recorder
	NeedTools(&r, "go", "rvtest-no-such-tool")
	if !strings.Contains(r.skip, "rvtest-no-such-tool") || strings.Contains(r.skip, "go,") {
		t.Errorf("skip = %q, want it to name only the missing tool", r.skip)
	}
	r = recorder{}
	NeedTools(&r, "go")
	if r.skip != "" || r.fatal != "" {
		t.Errorf("go is on PATH, yet the gate said %q %q", r.skip, r.fatal)
	}
}

// TestPingDocker: a socket nobody listens on is an error that names it.
func TestPingDocker(t *testing.T) {
	sock := t.TempDir() + "/none.sock"
	if err := pingDocker(sock); err == nil || !strings.Contains(err.Error(), "none.sock") {
		t.Errorf("pingDocker(%s) = %v, want an error naming it", sock, err)
	}
}

// TestNeedDockerPasses: where root reaches an engine, the gate lets the
// test run.
func TestNeedDockerPasses(t *testing.T) {
	if err := pingDocker(dockerSocket); err != nil || os.Geteuid() != 0 {
		t.Skipf("no engine to pass with (%v, euid %d); TestPingDocker covers the refusal", err, os.Geteuid())
	}
	var r recorder
	NeedDocker(&r)
	if r.skip != "" || r.fatal != "" {
		t.Errorf("engine reachable as root, yet the gate said %q %q", r.skip, r.fatal)
	}
}
