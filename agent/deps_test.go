package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// MaxBinarySize is the budget for bin/agent as build.sh builds it.
const MaxBinarySize = 10 << 20

func goCmd(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TestDepsNoHeadNoCgo proves the agent never links the head's code, and
// needs no cgo: with CGO_ENABLED=0 no dependency is runtime/cgo, and under
// the default setting no non-standard dependency has cgo files.
func TestDepsNoHeadNoCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	deps := goCmd(t, []string{"CGO_ENABLED=0"}, "list", "-deps", ".")
	for _, d := range strings.Fields(deps) {
		if d == "github.com/rayvast/rayvast/head" || strings.HasPrefix(d, "github.com/rayvast/rayvast/head/") {
			t.Errorf("agent depends on %s", d)
		}
		if d == "runtime/cgo" || d == "C" {
			t.Errorf("agent depends on %s", d)
		}
	}
	// Standard packages (net, os/user) carry optional cgo files; ours and
	// third-party ones must have none, or CGO_ENABLED=0 would drop code.
	withCgo := goCmd(t, []string{"CGO_ENABLED=1"}, "list", "-deps", "-f", `{{if not .Standard}}{{if .CgoFiles}}{{.ImportPath}}{{end}}{{end}}`, ".")
	if s := strings.TrimSpace(withCgo); s != "" {
		t.Errorf("non-standard dependencies with cgo files: %s", s)
	}
}

// TestBinaryStaticAndSmall builds the agent exactly as build.sh does and
// proves it is a static ELF (no interpreter, no shared libraries), records
// CGO_ENABLED=0, and fits the size budget.
func TestBinaryStaticAndSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent")
	}
	bin := rvtest.Build(t, t.TempDir(), "./agent")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("agent has a PT_INTERP program header: dynamically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("agent needs shared libraries %v", libs)
	}
	if m := goCmd(t, nil, "version", "-m", bin); !strings.Contains(m, "CGO_ENABLED=0") {
		t.Errorf("go version -m does not record CGO_ENABLED=0:\n%s", m)
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent binary: %d bytes (%.2f MiB), budget %d MiB", st.Size(), float64(st.Size())/(1<<20), MaxBinarySize>>20)
	if st.Size() > MaxBinarySize {
		t.Errorf("agent binary is %d bytes (%.2f MiB), over the %d MiB budget", st.Size(), float64(st.Size())/(1<<20), MaxBinarySize>>20)
	}
}
