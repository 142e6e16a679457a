package fakeray_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// record is the part of fakeray's JSON record the tests read.
type record struct {
	Argv    []string          `json:"argv"`
	Env     map[string]string `json:"env"`
	PID     int               `json:"pid"`
	PPID    int               `json:"ppid"`
	PGID    int               `json:"pgid"`
	SysPath []string          `json:"sys_path"`
	Imports map[string]any    `json:"imports"`
	Signal  int               `json:"signal"`
	Ignored []int             `json:"ignored"`
	After   float64           `json:"exited_after"`
}

// fake is one running fakeray with its stdout read line by line.
type fake struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	lines  chan string
	rec    string
}

// python is the interpreter the tests run fakeray with.
func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 not found: fakeray needs it: %v", err)
	}
	return p
}

// startFake runs the agent's exact Ray command (SPEC §9) with this dir on
// PYTHONPATH (after shimDir, when given) plus extra env, in its own group.
func startFake(t *testing.T, shimDir string, extra []string, args ...string) *fake {
	t.Helper()
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	pp := here
	if shimDir != "" {
		pp = shimDir + ":" + here
	}
	f := &fake{rec: filepath.Join(t.TempDir(), "record.json"), lines: make(chan string, 100)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard only
	f.cancel = cancel
	argv := append([]string{"-m", "ray.scripts.scripts"}, args...)
	f.cmd = exec.CommandContext(ctx, python(t), argv...)
	f.cmd.Dir = t.TempDir()
	f.cmd.Env = append([]string{"PATH=/usr/bin:/bin", "PYTHONPATH=" + pp, "FAKERAY_RECORD=" + f.rec}, extra...)
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f.cmd.Stderr = os.Stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cmd.Process.Kill(); cancel() })
	go func() {
		defer close(f.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	return f
}

// expect waits for the stdout line want.
func (f *fake) expect(t *testing.T, want string) {
	t.Helper()
	for l := range f.lines {
		if l == want {
			return
		}
	}
	t.Fatalf("fakeray's stdout ended before %q", want)
}

// wait returns the exit code (-1 when killed by a signal).
func (f *fake) wait(t *testing.T) int {
	t.Helper()
	for range f.lines {
	}
	err := f.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return f.cmd.ProcessState.ExitCode()
}

func (f *fake) record(t *testing.T) record {
	t.Helper()
	b, err := os.ReadFile(f.rec)
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("record %s: %v", b, err)
	}
	return r
}

// TestStartBlockRecordsAndStops: the agent's command starts fakeray, which
// records argv, env, ids and the shim on sys.path, blocks, and on each stop
// signal records it and exits with FAKERAY_EXIT_CODE.
func TestStartBlockRecordsAndStops(t *testing.T) {
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "rayvast_shim.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"start", "--block", "--address=10.0.0.1:6379", "--num-gpus=1"}
	cases := []struct {
		name     string
		sig      syscall.Signal
		exitCode string // FAKERAY_EXIT_CODE; "" = unset
		want     int
	}{
		{"term", syscall.SIGTERM, "7", 7},
		{"int", syscall.SIGINT, "3", 3},
		{"hup", syscall.SIGHUP, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			extra := []string{"RAY_USE_TLS=1", "FAKERAY_IMPORT=rayvast_shim,no_such_module"}
			if c.exitCode != "" {
				extra = append(extra, "FAKERAY_EXIT_CODE="+c.exitCode)
			}
			f := startFake(t, shim, extra, args...)
			f.expect(t, "fakeray started")
			r := f.record(t)
			if !slices.Equal(r.Argv, args) {
				t.Errorf("argv = %q, want %q", r.Argv, args)
			}
			if r.Env["RAY_USE_TLS"] != "1" {
				t.Errorf("env RAY_USE_TLS = %q, want 1", r.Env["RAY_USE_TLS"])
			}
			if pid := f.cmd.Process.Pid; r.PID != pid || r.PGID != pid || r.PPID != os.Getpid() {
				t.Errorf("pid/pgid/ppid = %d/%d/%d, want %d/%d/%d", r.PID, r.PGID, r.PPID, pid, pid, os.Getpid())
			}
			// With -m, sys.path[0] is the working dir; PYTHONPATH follows.
			if len(r.SysPath) < 2 || r.SysPath[1] != shim {
				t.Errorf("sys_path = %q, want the shim %q at [1]", r.SysPath, shim)
			}
			if r.Imports["rayvast_shim"] != true {
				t.Errorf("imports[rayvast_shim] = %v, want true", r.Imports["rayvast_shim"])
			}
			if s, _ := r.Imports["no_such_module"].(string); !strings.Contains(s, "ModuleNotFoundError") {
				t.Errorf("imports[no_such_module] = %v, want the error", r.Imports["no_such_module"])
			}
			f.cmd.Process.Signal(c.sig)
			if got := f.wait(t); got != c.want {
				t.Errorf("exit code %d, want %d", got, c.want)
			}
			if got := f.record(t).Signal; got != int(c.sig) {
				t.Errorf("recorded signal %d, want %d", got, c.sig)
			}
		})
	}
}

// TestIgnoreTerm: with FAKERAY_IGNORE_TERM=1 SIGTERM is recorded but does not
// stop it (what a supervisor's grace-period SIGKILL is for); SIGINT still does.
func TestIgnoreTerm(t *testing.T) {
	f := startFake(t, "", []string{"FAKERAY_IGNORE_TERM=1"}, "start", "--block")
	f.expect(t, "fakeray started")
	f.cmd.Process.Signal(syscall.SIGTERM)
	f.expect(t, "fakeray ignored SIGTERM")
	f.cmd.Process.Signal(syscall.SIGINT)
	if got := f.wait(t); got != 0 {
		t.Errorf("exit code %d, want 0", got)
	}
	r := f.record(t)
	if !slices.Equal(r.Ignored, []int{int(syscall.SIGTERM)}) || r.Signal != int(syscall.SIGINT) {
		t.Errorf("ignored %v signal %d, want [15] and 2", r.Ignored, r.Signal)
	}
}

// TestExitAfter: FAKERAY_EXIT_AFTER ends it by itself with FAKERAY_EXIT_CODE.
func TestExitAfter(t *testing.T) {
	f := startFake(t, "", []string{"FAKERAY_EXIT_AFTER=0.1", "FAKERAY_EXIT_CODE=5"}, "start", "--block")
	if got := f.wait(t); got != 5 {
		t.Errorf("exit code %d, want 5", got)
	}
	if r := f.record(t); r.After != 0.1 || r.Signal != 0 {
		t.Errorf("exited_after %v signal %d, want 0.1 and none", r.After, r.Signal)
	}
}

// TestWithoutBlockOrStart: `start` without --block returns at once like Ray's;
// anything but `start` is a usage error.
func TestWithoutBlockOrStart(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"start_no_block", []string{"start", "--head"}, 0},
		{"stop", []string{"stop"}, 2},
		{"nothing", nil, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := startFake(t, "", nil, c.args...).wait(t); got != c.want {
				t.Errorf("exit code %d, want %d", got, c.want)
			}
		})
	}
}

// TestImportRay: plain `import ray` works, as the bootloader's probe needs.
func TestImportRay(t *testing.T) {
	here, _ := filepath.Abs(".")
	for _, c := range []struct{ env, want string }{{"", "2.53.0"}, {"FAKERAY_VERSION=2.40.1", "2.40.1"}} {
		cmd := exec.Command(python(t), "-c", "import ray, ray.scripts.scripts; print(ray.__version__)")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "PYTHONPATH=" + here, c.env}
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != c.want {
			t.Fatalf("import ray (%s): %v: %q, want version %s", c.env, err, out, c.want)
		}
	}
}
