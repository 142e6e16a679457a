//go:build linux

package supervise

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// The test binary re-runs itself as every process a scenario needs (as the
// os/exec tests do): SUPERVISE_HELPER names the part it plays. Every helper
// reports what it saw as one line on fd 3, a pipe the test reads; lines stay
// short so concurrent writers never interleave (PIPE_BUF).
const (
	envHelper    = "SUPERVISE_HELPER"
	envChild     = "SUPERVISE_CHILD"           // supervisor: the main child's scenario
	envGrace     = "SUPERVISE_GRACE"           // supervisor: Config.Grace
	envStraggler = "SUPERVISE_STRAGGLER"       // straggler child: its grandchild's scenario
	envParent    = "SUPERVISE_PARENT"          // orphan: the pid of the parent that abandons it
	envLinger    = "SUPERVISE_LINGER"          // supervisor: after Done, stay until all children are reaped
	envChildren  = "SUPERVISE_CHILDREN"        // restarter: comma-separated child scenarios, run in turn
	envHold      = "SUPERVISE_HOLD"            // restarter: before each restart, wait until Stopping closes
	envStragGr   = "SUPERVISE_STRAGGLER_GRACE" // supervisor, cycler: Config.StragglerGrace
	envGate      = "SUPERVISE_GATE"            // any scenario: first read stdin to its end
)

// helperDeadline bounds every wait inside a helper so a broken supervisor
// fails a test instead of hanging it.
const helperDeadline = 10 * time.Second

var reportFile *os.File // fd 3 in helpers; never opened in the test runner itself

func report(format string, args ...any) {
	fmt.Fprintf(reportFile, format+"\n", args...)
}

// helperCmd re-runs this binary as scenario, handing on the report pipe.
func helperCmd(scenario string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), envHelper+"="+scenario), env...)
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{reportFile}
	return cmd
}

// helperLifetime ends every helper that is still alive, so a broken
// supervisor (which may leave grandchildren behind) cannot leak processes.
const helperLifetime = 60 * time.Second

func runHelper(scenario string) int {
	reportFile = os.NewFile(3, "report")
	time.AfterFunc(helperLifetime, func() { os.Exit(101) })
	if os.Getenv(envGate) != "" {
		io.Copy(io.Discard, os.Stdin) // held until the parent closes the pipe
	}
	switch {
	case scenario == "supervisor":
		return supervisorMain()
	case scenario == "start-errors":
		return startErrorsMain()
	case scenario == "restarter":
		return restarterMain()
	case scenario == "cycler":
		return cyclerMain()
	case strings.HasPrefix(scenario, "exit:"):
		code, _ := strconv.Atoi(strings.TrimPrefix(scenario, "exit:"))
		return code
	case strings.HasPrefix(scenario, "kill:"):
		sig, _ := strconv.Atoi(strings.TrimPrefix(scenario, "kill:"))
		unix.Kill(os.Getpid(), syscall.Signal(sig))
		return blockForever()
	case scenario == "crash":
		return crash()
	case scenario == "report-signal":
		return reportSignal("child", 7)
	case scenario == "ignore-term":
		return ignoreTerm("child")
	case scenario == "group":
		return groupMain()
	case scenario == "grandchild":
		return reportSignal("grandchild", 0)
	case scenario == "straggler":
		return stragglerMain()
	case scenario == "straggler-polite":
		return reportSignal("straggler", 0)
	case scenario == "straggler-stubborn":
		return ignoreTerm("straggler")
	case scenario == "orphans":
		return orphansMain()
	case scenario == "orphan-parent":
		return orphanParent()
	case scenario == "orphan":
		return orphan()
	case scenario == "detach":
		return detachMain()
	case scenario == "detached":
		return detached()
	}
	fmt.Fprintf(os.Stderr, "unknown helper scenario %q\n", scenario)
	return 100
}

// supervisorMain plays the agent: it supervises the SUPERVISE_CHILD scenario
// and exits with its code. SIGUSR1 stands for the heartbeat's stop action.
func supervisorMain() int {
	grace, _ := time.ParseDuration(os.Getenv(envGrace))
	straggler, _ := time.ParseDuration(os.Getenv(envStragGr))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sup := New(Config{Log: log, Grace: grace, StragglerGrace: straggler})
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGUSR1)
	go func() {
		for range stop {
			sup.Stop()
		}
	}()
	child := helperCmd(os.Getenv(envChild))
	child.Stdin = os.Stdin
	report("supervisor pid=%d", os.Getpid())
	if err := sup.Start(child); err != nil {
		report("supervisor start: %v", err)
		return 99
	}
	if sup.PID() != child.Process.Pid {
		report("supervisor PID()=%d, child pid %d", sup.PID(), child.Process.Pid)
	}
	<-sup.Done()
	// The run loop queues a signal before it forwards it, so everything
	// forwarded before Done is already buffered here.
	for drained := false; !drained; {
		select {
		case sig := <-sup.Signalled():
			report("supervisor signalled %d", sig)
		default:
			drained = true
		}
	}
	report("supervisor exit %d", sup.ExitCode())
	if os.Getenv(envLinger) != "" {
		report("supervisor after done: %s", waitNoChildren())
	}
	return sup.ExitCode()
}

// restarterMain plays the agent's restart loop: it runs each scenario of
// SUPERVISE_CHILDREN in turn through Start and then Restart, reporting each
// exit, until a Restart is refused or the list ends. SIGUSR1 is Stop. With
// SUPERVISE_HOLD it waits before each restart (the agent's backoff) until
// the stop the test sends between children has been seen.
func restarterMain() int {
	grace, _ := time.ParseDuration(os.Getenv(envGrace))
	sup := New(Config{Log: slog.New(slog.NewTextHandler(os.Stderr, nil)), Grace: grace})
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGUSR1)
	go func() {
		for range stop {
			sup.Stop()
		}
	}()
	report("supervisor pid=%d", os.Getpid())
	children := strings.Split(os.Getenv(envChildren), ",")
	// The first child is gated on a pipe so it surely still runs while the
	// Restart below is tried: a quick exit:N could otherwise end first and
	// let that Restart run exit:0 in its place.
	first := helperCmd(children[0], envGate+"=1")
	gate, open, err := os.Pipe()
	if err != nil {
		report("supervisor pipe: %v", err)
		return 99
	}
	first.Stdin = gate
	if err := sup.Start(first); err != nil {
		report("supervisor start: %v", err)
		return 99
	}
	gate.Close()
	if err := sup.Restart(helperCmd("exit:0")); err != nil {
		report("supervisor restart while running refused")
	}
	open.Close()
	for _, next := range children[1:] {
		report("supervisor child pid=%d", sup.PID())
		<-sup.Done()
		report("supervisor exit %d", sup.ExitCode())
		if os.Getenv(envHold) != "" {
			report("supervisor holding")
			select {
			case <-sup.Stopping():
			case <-time.After(helperDeadline):
				report("supervisor hold: no stop seen")
			}
		}
		err := sup.Restart(helperCmd(next))
		if errors.Is(err, ErrStopping) {
			report("supervisor restart refused: stopping signal=%d", sup.StopSignal())
			return sup.ExitCode()
		}
		if err != nil {
			report("supervisor restart: %v", err)
			return 98
		}
	}
	report("supervisor child pid=%d", sup.PID())
	<-sup.Done()
	report("supervisor exit %d", sup.ExitCode())
	if err := sup.Restart(helperCmd("exit:0")); errors.Is(err, ErrStopping) {
		report("supervisor restart refused: stopping signal=%d", sup.StopSignal())
	}
	return sup.ExitCode()
}

// cyclerMain plays the agent told that the Ray head restarted: it starts
// SUPERVISE_CHILD, cycles it once the child had time to install its
// handlers, reports the exit and
// how long the cycle took, then restarts exit:5 and reports that exit.
func cyclerMain() int {
	grace, _ := time.ParseDuration(os.Getenv(envGrace))
	straggler, _ := time.ParseDuration(os.Getenv(envStragGr))
	sup := New(Config{Log: slog.New(slog.NewTextHandler(os.Stderr, nil)), Grace: grace, StragglerGrace: straggler})
	report("supervisor pid=%d", os.Getpid())
	if err := sup.Start(helperCmd(os.Getenv(envChild))); err != nil {
		report("supervisor start: %v", err)
		return 99
	}
	time.Sleep(300 * time.Millisecond) // the child installs its handlers
	start := time.Now()
	sup.Cycle(straggler)
	select {
	case <-sup.Done():
	case <-time.After(helperDeadline):
		report("supervisor cycle: child still runs")
		return 98
	}
	report("supervisor cycled exit=%d ms=%d", sup.ExitCode(), time.Since(start).Milliseconds())
	if err := sup.Restart(helperCmd("exit:5")); err != nil {
		report("supervisor restart after cycle: %v", err)
		return 97
	}
	<-sup.Done()
	report("supervisor exit %d", sup.ExitCode())
	return sup.ExitCode()
}

// waitNoChildren plays an agent that outlives Ray (the last heartbeat): it
// polls until the process has no children left, not even zombies, which only
// happens if the supervisor still reaps after Done.
func waitNoChildren() string {
	var left []string
	var scanErr error
	if rvtest.Until(helperDeadline, func() bool {
		procs, err := scanProcs()
		if scanErr = err; err != nil {
			return true
		}
		left = left[:0]
		for _, p := range procs {
			if p.ppid == os.Getpid() {
				left = append(left, fmt.Sprintf("pid=%d state=%s", p.pid, p.state))
			}
		}
		return len(left) == 0
	}) {
		if scanErr != nil {
			return scanErr.Error()
		}
		return "no children"
	}
	return "children left: " + strings.Join(left, ", ")
}

// startErrorsMain checks Start's refusals, which need a process of their own
// because a started Supervisor owns its process for good.
func startErrorsMain() int {
	err := New(Config{}).Start(exec.Command("/nonexistent/rayvast-supervise-test"))
	report("start-errors missing: %v", err != nil)
	sup := New(Config{})
	err = sup.Start(helperCmd("exit:5"))
	report("start-errors after failure: %v", err)
	report("start-errors twice: %v", sup.Start(helperCmd("exit:0")) != nil)
	report("start-errors second supervisor: %v", New(Config{}).Start(helperCmd("exit:0")) != nil)
	<-sup.Done()
	report("start-errors exit %d", sup.ExitCode())
	return 0
}

// crash dies the way a crashing runtime does: GOTRACEBACK=crash turns a fatal
// panic into SIGABRT.
func crash() int {
	unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}) // no core file in the tree
	debug.SetTraceback("crash")
	var p *int
	*p = 1
	return 0
}

// reportSignal waits for SIGTERM/SIGINT/SIGHUP, says which, and exits with
// code: a handled signal, not a death by it.
func reportSignal(name string, code int) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	report("%s ready pid=%d pgid=%d", name, os.Getpid(), unix.Getpgrp())
	fmt.Println("ready")
	sig := <-sigs
	report("%s got %d", name, sig)
	return code
}

// ignoreTerm is a child that will not stop politely.
func ignoreTerm(name string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	report("%s ready pid=%d pgid=%d", name, os.Getpid(), unix.Getpgrp())
	fmt.Println("ready")
	return blockForever()
}

// groupMain starts a grandchild in its own (inherited) process group, then
// waits for a signal itself: a forward to the group reaches both.
func groupMain() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	gc := helperCmd("grandchild")
	if err := gc.Start(); err != nil {
		report("child start grandchild: %v", err)
		return 1
	}
	report("child ready pid=%d pgid=%d", os.Getpid(), unix.Getpgrp())
	sig := <-sigs
	report("child got %d", sig)
	gc.Wait()
	return 7
}

// stragglerMain leaves a grandchild behind in its group and exits 3.
func stragglerMain() int {
	gc := helperCmd(os.Getenv(envStraggler))
	out, err := gc.StdoutPipe()
	if err == nil {
		err = gc.Start()
	}
	if err != nil {
		report("child start straggler: %v", err)
		return 1
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	report("child straggler said %q, exiting 3", line)
	return 3
}

// orphansMain makes three orphans by double fork, waits until each is gone
// from /proc (exited and reaped by whoever adopted it), then waits for a
// signal like reportSignal.
func orphansMain() int {
	var pids []int
	for range 3 {
		out, err := helperCmd("orphan-parent").Output()
		pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || perr != nil {
			report("child orphan-parent: %v %v", err, perr)
			return 1
		}
		pids = append(pids, pid)
	}
	for _, pid := range pids {
		if state := waitGone(pid); state != "" {
			report("child orphans not reaped: pid=%d %s", pid, state)
			return reportSignal("child", 7)
		}
	}
	report("child orphans reaped")
	return reportSignal("child", 7)
}

// detachMain leaves behind a process in a session of its own, which the
// group drain does not wait for, and exits 4.
func detachMain() int {
	d := helperCmd("detached")
	d.Stdin = os.Stdin
	d.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := d.StdoutPipe()
	if err == nil {
		err = d.Start()
	}
	if err != nil {
		report("child start detached: %v", err)
		return 1
	}
	bufio.NewReader(out).ReadString('\n')
	return 4
}

// detached outlives the main child, is adopted by the supervisor, and exits
// when the test closes stdin.
func detached() int {
	parent := os.Getppid()
	fmt.Println("ready")
	rvtest.Until(helperDeadline, func() bool { return os.Getppid() != parent })
	report("detached pid=%d ppid=%d", os.Getpid(), os.Getppid())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

func orphanParent() int {
	o := helperCmd("orphan", envParent+"="+strconv.Itoa(os.Getpid()))
	if err := o.Start(); err != nil {
		report("orphan-parent start: %v", err)
		return 1
	}
	fmt.Println(o.Process.Pid)
	return 0 // without waiting: the orphan is someone else's now
}

// orphan waits to be adopted, tells who adopted it, and exits.
func orphan() int {
	parent, _ := strconv.Atoi(os.Getenv(envParent))
	if !rvtest.Until(helperDeadline, func() bool { return os.Getppid() != parent }) {
		report("orphan pid=%d never re-parented", os.Getpid())
		return 1
	}
	report("orphan pid=%d ppid=%d", os.Getpid(), os.Getppid())
	return 0
}

// waitGone polls until pid has left /proc; on timeout it returns its State
// and PPid lines (a zombie nobody reaped shows "State: Z").
func waitGone(pid int) string {
	path := fmt.Sprintf("/proc/%d/status", pid)
	var b []byte
	if rvtest.Until(helperDeadline, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err != nil
	}) {
		return ""
	}
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "State:") || strings.HasPrefix(l, "PPid:") {
			keep = append(keep, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(keep, " ")
}

// blockForever parks a helper until a signal ends it (select{} alone would
// trip the runtime's deadlock detector).
func blockForever() int {
	for {
		time.Sleep(time.Hour)
	}
}

// procStat is one process as /proc/PID/stat shows it.
type procStat struct {
	pid, ppid int
	state     string
}

// scanProcs reads every process's pid, state and parent from /proc.
func scanProcs() ([]procStat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// comm may hold spaces and parentheses: the fields start after the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, procStat{pid: pid, ppid: ppid, state: f[0]})
	}
	return out, nil
}
