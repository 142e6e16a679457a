package fakeray_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/test/fakeray"
)

// TestStartBlockRecordsAndStops: the agent's command starts fakeray, which
// records argv, env, ids and the shim on sys.path, and on each stop signal
// kills its children and exits as Ray does (SIGTERM: 1; SIGINT, SIGHUP: by
// the signal), or with FAKERAY_EXIT_CODE when set.
func TestStartBlockRecordsAndStops(t *testing.T) {
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "rayvast_shim.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		sig      syscall.Signal
		exitCode string // FAKERAY_EXIT_CODE; "" = unset
		want     int
	}{
		{"term", syscall.SIGTERM, "", 1},
		{"term_override", syscall.SIGTERM, "7", 7},
		{"int", syscall.SIGINT, "", -1},
		{"int_override", syscall.SIGINT, "3", 3},
		{"hup", syscall.SIGHUP, "", -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := newNode(t, "127.0.0.1", 3)
			extra := append(secrets(t), "FAKERAY_IMPORT=rayvast_shim,no_such_module")
			if c.exitCode != "" {
				extra = append(extra, "FAKERAY_EXIT_CODE="+c.exitCode)
			}
			f := run(t, shim, extra, nil, n.args()...)
			f.expect(t, "fakeray started")
			r := f.record(t)
			if !slices.Equal(r.Argv, n.args()) {
				t.Errorf("argv = %q, want %q", r.Argv, n.args())
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
			r = f.record(t)
			if r.Signal != int(c.sig) {
				t.Errorf("recorded signal %d, want %d", r.Signal, c.sig)
			}
			for name, ch := range r.Children {
				gone(t, name, ch.PID)
			}
		})
	}
}

// TestChildDeath: an agent's death takes the raylet and `ray start` with it
// (exit 1); a core worker's death does not (the raylet frees its port).
func TestChildDeath(t *testing.T) {
	for _, c := range []struct {
		kill  string
		fatal bool
	}{{"runtime_env_agent", true}, {"dashboard_agent", true}, {"raylet", true}, {"core_worker_0", false}} {
		t.Run(c.kill, func(t *testing.T) {
			n := newNode(t, "127.0.0.1", 2)
			f := run(t, "", secrets(t), nil, n.args()...)
			f.expect(t, "fakeray started")
			syscall.Kill(f.record(t).Children[c.kill].PID, syscall.SIGKILL)
			if !c.fatal {
				time.Sleep(500 * time.Millisecond)
				f.cmd.Process.Signal(syscall.SIGTERM)
				if got := f.wait(t); got != 1 || f.record(t).Signal != int(syscall.SIGTERM) {
					t.Errorf("exit %d signal %d: ray start must have run on until SIGTERM", got, f.record(t).Signal)
				}
				return
			}
			if got := f.wait(t); got != 1 {
				t.Errorf("exit code %d, want 1", got)
			}
			r := f.record(t)
			if r.Exits["raylet"] == 0 || r.Signal != 0 {
				t.Errorf("unexpected exits %v signal %d, want the raylet's death", r.Exits, r.Signal)
			}
			for name, ch := range r.Children {
				gone(t, name, ch.PID)
			}
		})
	}
}

// TestReaper: when `ray start` itself is SIGKILLed, Ray's reaper kills the
// rest of its process group: nothing outlives it.
func TestReaper(t *testing.T) {
	n := newNode(t, "127.0.0.1", 2)
	f := run(t, "", secrets(t), nil, n.args()...)
	f.expect(t, "fakeray started")
	r := f.record(t)
	f.cmd.Process.Kill()
	f.wait(t)
	for name, ch := range r.Children {
		gone(t, name, ch.PID)
	}
}

// TestIgnoreTerm: with FAKERAY_IGNORE_TERM=1 SIGTERM is recorded but does not
// stop it (what a supervisor's grace-period SIGKILL is for); SIGINT still does.
func TestIgnoreTerm(t *testing.T) {
	n := newNode(t, "127.0.0.1", 2)
	f := run(t, "", append(secrets(t), "FAKERAY_IGNORE_TERM=1", "FAKERAY_EXIT_CODE=0"), nil, n.args()...)
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

// TestExitAfter: FAKERAY_EXIT_AFTER ends it by itself, with 1 as a Ray that
// lost a child, or FAKERAY_EXIT_CODE.
func TestExitAfter(t *testing.T) {
	for _, c := range []struct {
		code string
		want int
	}{{"", 1}, {"5", 5}} {
		n := newNode(t, "127.0.0.1", 2)
		env := append(secrets(t), "FAKERAY_EXIT_AFTER=0.5")
		if c.code != "" {
			env = append(env, "FAKERAY_EXIT_CODE="+c.code)
		}
		f := run(t, "", env, nil, n.args()...)
		if got := f.wait(t); got != c.want {
			t.Errorf("exit code %d, want %d", got, c.want)
		}
		if r := f.record(t); r.After != 0.5 || r.Signal != 0 {
			t.Errorf("exited_after %v signal %d, want 0.5 and none", r.After, r.Signal)
		}
	}
}

// TestImportRay: plain `import ray` works, as the bootloader's probe needs,
// and the agent's version probe reads FAKERAY_VERSION (default 2.53.0).
func TestImportRay(t *testing.T) {
	for _, c := range []struct{ env, want string }{{"", "2.53.0"}, {"FAKERAY_VERSION=2.51.1", "2.51.1"}} {
		cmd := exec.Command(python(t), "-c", "import ray, platform, ray.scripts.scripts; print(ray.__version__, platform.python_version())")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "PYTHONPATH=" + fakeray.Dir(), c.env}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), c.want+" 3.") {
			t.Errorf("import ray with %q: %v: %q, want %s", c.env, err, out, c.want)
		}
	}
}

// TestTick: FAKERAY_TICK_S prints `fakeray tick N` while it blocks (a Ray
// log that grows, for `head logs --follow`).
func TestTick(t *testing.T) {
	n := newNode(t, "127.0.0.1", 2)
	f := run(t, "", append(secrets(t), "FAKERAY_TICK_S=0.2"), nil, n.args()...)
	f.expect(t, "fakeray tick 1")
	f.expect(t, "fakeray tick 2")
}

// TestBuildsNativesOnFirstUse: after a plain clone (no natives built) the
// first `ray start` builds them, so no test needs a build step first.
func TestBuildsNativesOnFirstUse(t *testing.T) {
	copyDir := t.TempDir()
	cp := exec.Command("cp", "-a", fakeray.Dir()+"/.", copyDir)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("copy: %v: %s", err, out)
	}
	if err := os.RemoveAll(filepath.Join(copyDir, "ray", "core")); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, "127.0.0.1", 2)
	f := &fake{rec: filepath.Join(t.TempDir(), "record.json"), lines: make(chan string, 100)}
	f.cmd = exec.Command(python(t), append([]string{"-m", "ray.scripts.scripts"}, n.args()...)...)
	f.cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "PYTHONPATH=" + copyDir, "FAKERAY_RECORD=" + f.rec}, secrets(t)...)
	f.cmd.Dir = t.TempDir() // under -m, the working dir is sys.path[0]
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, _ := f.cmd.StdoutPipe()
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL) })
	go func() {
		defer close(f.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
	}()
	f.expect(t, "fakeray started")
	if r := f.record(t); !strings.HasPrefix(r.Children["raylet"].Argv[0], copyDir) {
		t.Errorf("raylet %q, want the one built under %s", r.Children["raylet"].Argv[0], copyDir)
	}
}
