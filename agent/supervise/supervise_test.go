//go:build linux

package supervise

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// Two grace periods: stubborn children are SIGKILLed after shortGrace, which
// only sets how fast those tests run; children expected to exit politely get
// politeGrace, long enough that a slow machine (or -race) never turns their
// clean exit into a SIGKILL.
const (
	shortGrace  = 300 * time.Millisecond
	politeGrace = 10 * time.Second
)

// TestExitCodes proves ExitCode (and the agent's exit) is the child's code,
// or 128+signal when a signal killed it, as tini reports it.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		child string
		want  int
	}{
		{"exit:0", 0},
		{"exit:1", 1},
		{"exit:42", 42},
		{"exit:255", 255},
		{"kill:9", 128 + 9},   // SIGKILL
		{"kill:15", 128 + 15}, // SIGTERM with no handler: the Go runtime dies by it
		{"crash", 128 + 6},    // a fatal panic under GOTRACEBACK=crash raises SIGABRT
	} {
		t.Run(tc.child, func(t *testing.T) {
			r := startSupervisor(t, tc.child, politeGrace, nil)
			if got, want := r.expect("supervisor exit"), fmt.Sprintf("supervisor exit %d", tc.want); got != want {
				t.Errorf("ExitCode: got %q, want %q", got, want)
			}
			if got := r.wait(); got != tc.want {
				t.Errorf("supervisor process exit: got %d, want %d", got, tc.want)
			}
		})
	}
}

// TestForwardsSignals proves each terminating signal the agent receives
// reaches the child (which runs in its own process group), that the agent
// hears of it through Signalled, and that a child that handles the signal
// keeps its own exit code.
func TestForwardsSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			r := startSupervisor(t, "report-signal", politeGrace, nil)
			sup := field(t, r.expect("supervisor pid="), "pid")
			ready := r.expect("child ready")
			if pid, pgid := field(t, ready, "pid"), field(t, ready, "pgid"); pgid != pid {
				t.Errorf("child's process group: got %d, want its own pid %d", pgid, pid)
			}
			r.signal(sup, sig)
			r.expect(fmt.Sprintf("child got %d", sig))
			r.expect(fmt.Sprintf("supervisor signalled %d", sig))
			if got := r.wait(); got != 7 {
				t.Errorf("exit: got %d, want the child's 7", got)
			}
		})
	}
}

// TestForwardsToWholeGroup proves the forward goes to the process group: a
// grandchild the child did not tell gets SIGTERM too.
func TestForwardsToWholeGroup(t *testing.T) {
	r := startSupervisor(t, "group", politeGrace, nil)
	sup := field(t, r.expect("supervisor pid="), "pid")
	child := field(t, r.expect("child ready"), "pid")
	if gc := field(t, r.expect("grandchild ready"), "pgid"); gc != child {
		t.Fatalf("grandchild's group: got %d, want the child's %d", gc, child)
	}
	r.signal(sup, syscall.SIGTERM)
	r.expect("child got 15")
	r.expect("grandchild got 15")
	if got := r.wait(); got != 7 {
		t.Errorf("exit: got %d, want 7", got)
	}
}

// TestGraceKillsStubbornChild proves a child ignoring SIGTERM is SIGKILLed,
// and not before the grace period ran out.
func TestGraceKillsStubbornChild(t *testing.T) {
	r := startSupervisor(t, "ignore-term", shortGrace, nil)
	sup := field(t, r.expect("supervisor pid="), "pid")
	r.expect("child ready")
	start := time.Now()
	r.signal(sup, syscall.SIGTERM)
	if got := r.wait(); got != 128+9 {
		t.Errorf("exit: got %d, want 137 (SIGKILL)", got)
	}
	if took := time.Since(start); took < shortGrace {
		t.Errorf("SIGKILL after %v, before the grace of %v", took, shortGrace)
	}
	r.expect("supervisor signalled 15")
}

// TestStop proves Stop (the heartbeat's stop action, SIGUSR1 in the helper)
// SIGTERMs the group, SIGKILLs it after the grace, and is not reported as a
// signal the agent received.
func TestStop(t *testing.T) {
	for _, tc := range []struct {
		child, line string
		grace       time.Duration
		want        int
	}{
		{"report-signal", "child got 15", politeGrace, 7},
		{"ignore-term", "", shortGrace, 128 + 9},
	} {
		t.Run(tc.child, func(t *testing.T) {
			r := startSupervisor(t, tc.child, tc.grace, nil)
			sup := field(t, r.expect("supervisor pid="), "pid")
			r.expect("child ready")
			r.signal(sup, syscall.SIGUSR1)
			if tc.line != "" {
				r.expect(tc.line)
			}
			r.expect("supervisor exit")
			if got := r.wait(); got != tc.want {
				t.Errorf("exit: got %d, want %d", got, tc.want)
			}
			if i := slices.IndexFunc(r.backlog, func(l string) bool { return strings.HasPrefix(l, "supervisor signalled") }); i >= 0 {
				t.Errorf("Stop reported as a signal: %q", r.backlog[i])
			}
		})
	}
}

// TestStragglersEndWithMainChild proves that when the main child exits on
// its own, what it left in its group is terminated (SIGTERM, then SIGKILL
// for the stubborn) and reaped before Done, and that the exit code stays
// the main child's.
func TestStragglersEndWithMainChild(t *testing.T) {
	for _, tc := range []struct {
		straggler, line string
		grace           time.Duration
	}{
		{"straggler-polite", "straggler got 15", politeGrace},
		{"straggler-stubborn", "", shortGrace},
	} {
		t.Run(tc.straggler, func(t *testing.T) {
			r := startSupervisor(t, "straggler", tc.grace, nil, envStraggler+"="+tc.straggler)
			pid := field(t, r.expect("straggler ready"), "pid")
			if tc.line != "" {
				r.expect(tc.line)
			}
			if got := r.wait(); got != 3 {
				t.Errorf("exit: got %d, want the main child's 3", got)
			}
			if !gone(pid) {
				t.Errorf("straggler %d outlived the supervisor", pid)
			}
		})
	}
}

// TestStragglersGetShortGrace proves what Ray left behind when its main
// process exited on its own is killed after the straggler grace, not the
// long grace a stop gets (issue 22: each restart waited 10 s for Ray's
// stragglers).
func TestStragglersGetShortGrace(t *testing.T) {
	start := time.Now()
	r := startSupervisor(t, "straggler", time.Minute, nil, envStraggler+"=straggler-stubborn", envStragGr+"="+shortGrace.String())
	pid := field(t, r.expect("straggler ready"), "pid")
	if got := r.wait(); got != 3 {
		t.Errorf("exit: got %d, want the main child's 3", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("supervisor done after %v with a stubborn straggler, want about the %v straggler grace, not the 1 min grace", d, shortGrace)
	}
	if !gone(pid) {
		t.Errorf("straggler %d outlived the supervisor", pid)
	}
}

// TestCycleEndsChildForRestart proves Cycle ends a child that ignores
// SIGTERM within the grace it is given (not the long grace a stop gets),
// at once with no grace, and is no stop: Restart works after it.
func TestCycleEndsChildForRestart(t *testing.T) {
	for _, grace := range []time.Duration{shortGrace, 0} {
		t.Run(grace.String(), func(t *testing.T) {
			r := startHelper(t, "cycler", nil, envChild+"=ignore-term", envGrace+"=1m", envStragGr+"="+grace.String())
			line := r.expect("supervisor cycled exit=")
			if code := field(t, line, "exit"); code != 128+int(syscall.SIGKILL) {
				t.Errorf("cycled child's exit %d, want SIGKILL's %d (it ignores SIGTERM)", code, 128+int(syscall.SIGKILL))
			}
			if ms := field(t, line, "ms"); ms > 5000 {
				t.Errorf("cycle took %d ms, want about the %v grace", ms, grace)
			}
			r.expect("supervisor exit 5")
			if got := r.wait(); got != 5 {
				t.Errorf("exit: got %d, want the restarted child's 5", got)
			}
		})
	}
}

// TestReapsOrphans proves the supervisor, though not PID 1, adopts double-
// forked orphans (subreaper), reaps them while the main child still runs,
// and still reports the main child's own status afterwards.
func TestReapsOrphans(t *testing.T) {
	r := startSupervisor(t, "orphans", politeGrace, nil)
	sup := field(t, r.expect("supervisor pid="), "pid")
	checkOrphans(t, r, sup)
	if z := zombiesOf(t, sup); len(z) > 0 {
		t.Errorf("zombie children of the supervisor: %v", z)
	}
	r.signal(sup, syscall.SIGTERM)
	r.expect("child got 15")
	if got := r.wait(); got != 7 {
		t.Errorf("exit: got %d, want 7", got)
	}
}

// checkOrphans expects three orphans adopted by wantParent and reaped.
func checkOrphans(t *testing.T, r *helperRun, wantParent int) {
	t.Helper()
	for range 3 {
		l := r.expect("orphan pid=")
		if got := field(t, l, "ppid"); got != wantParent {
			t.Errorf("orphan adopted by %d, want the supervisor %d (%q)", got, wantParent, l)
		}
	}
	if l := r.expect("child orphans"); l != "child orphans reaped" {
		t.Errorf("got %q, want the orphans reaped", l)
	}
	r.expect("child ready")
}

// TestAsPID1 runs the supervisor as the real PID 1 of a new PID namespace:
// orphans re-parent to it and are reaped, and SIGTERM from outside the
// namespace is delivered (the kernel drops it for a PID 1 with no handler)
// and forwarded.
func TestAsPID1(t *testing.T) {
	rvtest.NeedRoot(t, "unshare")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal(err)
	}
	wrap := []string{unshare, "--pid", "--fork", "--mount-proc", "--kill-child"}
	r := startSupervisor(t, "orphans", politeGrace, wrap)
	if l := r.expect("supervisor pid="); l != "supervisor pid=1" {
		t.Fatalf("got %q, want the supervisor to be PID 1", l)
	}
	checkOrphans(t, r, 1)
	outside := childOf(t, r.cmd.Process.Pid) // the supervisor's pid in our namespace
	if z := zombiesOf(t, outside); len(z) > 0 {
		t.Errorf("zombie children of PID 1: %v", z)
	}
	r.signal(outside, syscall.SIGTERM)
	r.expect("child got 15")
	r.expect("supervisor signalled 15")
	if got := r.wait(); got != 7 {
		t.Errorf("exit: got %d, want 7", got)
	}
}

// TestStartErrors proves Start reports a child that cannot start and leaves
// the process free for another Supervisor, refuses a second Start, and
// refuses a second Supervisor while one runs.
func TestStartErrors(t *testing.T) {
	r := startHelper(t, "start-errors", nil)
	for _, want := range []string{
		"start-errors missing: true",
		"start-errors after failure: <nil>",
		"start-errors twice: true",
		"start-errors second supervisor: true",
		"start-errors exit 5",
	} {
		if got := r.expect(strings.Join(strings.Fields(want)[:2], " ")); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if got := r.wait(); got != 0 {
		t.Errorf("exit: got %d, want 0", got)
	}
}

// TestExitCode proves the status-to-code mapping on raw wait statuses.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   unix.WaitStatus
		want int
	}{
		{"exit 0", 0 << 8, 0},
		{"exit 42", 42 << 8, 42},
		{"exit 255", 255 << 8, 255},
		{"SIGKILL", unix.WaitStatus(unix.SIGKILL), 137},
		{"SIGSEGV with core", unix.WaitStatus(unix.SIGSEGV) | 0x80, 139},
	} {
		if got := exitCode(tc.ws); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestSetGroup proves the child gets its own group and a death signal,
// without breaking a caller's Setsid or Pdeathsig.
func TestSetGroup(t *testing.T) {
	for _, tc := range []struct {
		name          string
		in            *syscall.SysProcAttr
		wantSetpgid   bool
		wantPdeathsig syscall.Signal
	}{
		{"nil", nil, true, syscall.SIGKILL},
		{"setsid", &syscall.SysProcAttr{Setsid: true}, false, syscall.SIGKILL},
		{"own pdeathsig", &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}, true, syscall.SIGTERM},
	} {
		cmd := &exec.Cmd{SysProcAttr: tc.in}
		setGroup(cmd)
		if got := cmd.SysProcAttr.Setpgid; got != tc.wantSetpgid {
			t.Errorf("%s: Setpgid got %v, want %v", tc.name, got, tc.wantSetpgid)
		}
		if got := cmd.SysProcAttr.Pdeathsig; got != tc.wantPdeathsig {
			t.Errorf("%s: Pdeathsig got %v, want %v", tc.name, got, tc.wantPdeathsig)
		}
	}
}

// TestChildDiesWithSupervisor proves Pdeathsig: when the agent is killed
// outright (not PID 1, so no namespace teardown), Ray does not live on.
func TestChildDiesWithSupervisor(t *testing.T) {
	r := startSupervisor(t, "report-signal", politeGrace, nil)
	sup := field(t, r.expect("supervisor pid="), "pid")
	child := field(t, r.expect("child ready"), "pid")
	r.signal(sup, syscall.SIGKILL)
	if !rvtest.Until(testDeadline, func() bool { return deadOrZombie(t, child) }) {
		unix.Kill(child, syscall.SIGKILL) // it is ours: it has not died, so its pid is not reused
		t.Fatalf("child %d still runs %v after the supervisor was killed", child, testDeadline)
	}
}

// deadOrZombie: the process is gone, or dead and waiting for a reaper we do
// not control (the container's own init).
func deadOrZombie(t *testing.T, pid int) bool {
	for _, p := range readProcs(t) {
		if p.pid == pid {
			return p.state == "Z"
		}
	}
	return true
}

// TestReapsAfterDone proves the supervisor keeps reaping once the main child
// is done: a process that left the group (setsid) is adopted and, when it
// exits after Done, reaped, while the exit code stays the main child's.
func TestReapsAfterDone(t *testing.T) {
	r := startSupervisor(t, "detach", politeGrace, nil, envLinger+"=1")
	sup := field(t, r.expect("supervisor pid="), "pid")
	if got := r.expect("supervisor exit"); got != "supervisor exit 4" {
		t.Errorf("got %q, want the main child's code 4", got)
	}
	if got := field(t, r.expect("detached pid="), "ppid"); got != sup {
		t.Errorf("detached process adopted by %d, want the supervisor %d", got, sup)
	}
	r.stdin.Close() // the detached process exits now, after Done
	if got := r.expect("supervisor after done"); got != "supervisor after done: no children" {
		t.Errorf("got %q, want every child reaped", got)
	}
	if got := r.wait(); got != 4 {
		t.Errorf("exit: got %d, want 4", got)
	}
}

// TestRestart proves a child that exits on its own (any code, any signal)
// can be followed by the next one: each gets its own pid and group, each
// exit is reported, a Restart while a child runs is refused, and once a
// forwarded signal ends the last child no restart is allowed.
func TestRestart(t *testing.T) {
	r := startRestarter(t, "exit:3,kill:9,crash,report-signal")
	sup := field(t, r.expect("supervisor pid="), "pid")
	r.expect("supervisor restart while running refused")
	pids := map[int]bool{}
	for _, want := range []string{"supervisor exit 3", "supervisor exit 137", "supervisor exit 134"} {
		pids[field(t, r.expect("supervisor child pid="), "pid")] = true
		if got := r.expect("supervisor exit"); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	last := field(t, r.expect("supervisor child pid="), "pid")
	pids[last] = true
	if len(pids) != 4 {
		t.Errorf("child pids %v: want 4 distinct", pids)
	}
	ready := r.expect("child ready")
	if pid, pgid := field(t, ready, "pid"), field(t, ready, "pgid"); pid != last || pgid != last {
		t.Errorf("restarted child pid %d pgid %d, want its own group %d", pid, pgid, last)
	}
	r.signal(sup, syscall.SIGTERM)
	r.expect("child got 15")
	if got := r.expect("supervisor exit"); got != "supervisor exit 7" {
		t.Errorf("got %q, want the signalled child's 7", got)
	}
	if got := r.expect("supervisor restart refused"); got != "supervisor restart refused: stopping signal=15" {
		t.Errorf("got %q, want a refusal naming SIGTERM", got)
	}
	if got := r.wait(); got != 7 {
		t.Errorf("exit: got %d, want 7", got)
	}
}

// TestRestartRefusedAfterStopBetweenChildren proves a Stop or a signal that
// arrives while no child runs (the agent's backoff) still refuses the next
// restart: the stop is not lost because nothing was there to receive it.
func TestRestartRefusedAfterStopBetweenChildren(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGUSR1, "supervisor restart refused: stopping signal=0"}, // Stop
		{syscall.SIGTERM, "supervisor restart refused: stopping signal=15"},
		{syscall.SIGHUP, "supervisor restart refused: stopping signal=1"},
	} {
		t.Run(unix.SignalName(tc.sig), func(t *testing.T) {
			r := startRestarter(t, "exit:2,report-signal", envHold+"=1")
			sup := field(t, r.expect("supervisor pid="), "pid")
			r.expect("supervisor exit 2")
			r.expect("supervisor holding")
			r.signal(sup, tc.sig)
			if got := r.expect("supervisor restart refused"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if got := r.wait(); got != 2 {
				t.Errorf("exit: got %d, want the last child's 2", got)
			}
		})
	}
}

func startRestarter(t *testing.T, children string, env ...string) *helperRun {
	t.Helper()
	env = append(env, envChildren+"="+children, envGrace+"="+politeGrace.String())
	return startHelper(t, "restarter", nil, env...)
}
