// Package supervise is the agent's PID 1 duty (docs/protocol.md §9): run one child (Ray)
// at a time in its own process group (Restart starts the next one after the
// last is gone), reap every zombie without stealing the child's
// exit status, forward SIGTERM/SIGINT/SIGHUP to the group, SIGKILL the group
// after a grace period, and report the child's exit code the way a shell does
// (128+signal when it was killed).
//
// It follows krallin/tini's shape: become a subreaper (subreaper_linux.go),
// configure signals (signals.go), reap (reap.go), and wait-and-forward (loop.go).
//
// Because it reaps with wait4(-1), a Supervisor owns every child of the
// process: after Start, nothing else in the process may wait for a child
// (exec.Cmd.Wait, os.Process.Wait) or its status may be stolen. Only one
// Supervisor may run per process.
//
// From Start on, SIGTERM, SIGINT and SIGHUP are caught for good (as PID 1
// that is what makes the kernel deliver them at all), so they no longer end
// the process by themselves: the agent hears of them on Signalled and ends
// when Done closes. Other signal.Notify channels for them still get copies;
// signal.Ignore or signal.Reset of them, or of SIGCHLD, would break the
// supervisor.
package supervise

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultGrace is how long the group gets between SIGTERM and SIGKILL when
// Config.Grace is zero.
const DefaultGrace = 10 * time.Second

// DefaultStragglerGrace is how long what the main child left in its group
// gets between SIGTERM and SIGKILL when Config.StragglerGrace is zero:
// Ray's processes without their `ray start` have nothing to save, and the
// next Ray waits for them (they hold its ports).
const DefaultStragglerGrace = 2 * time.Second

// Config configures a Supervisor.
type Config struct {
	Log *slog.Logger
	// Grace is the time between the first terminating signal the group gets
	// (forwarded, or from Stop) and SIGKILL of the whole group. Zero means
	// DefaultGrace.
	Grace time.Duration
	// StragglerGrace replaces Grace where nobody asked for a stop: for what
	// the main child left in its group when it exited on its own. Zero
	// means DefaultStragglerGrace.
	StragglerGrace time.Duration
}

// Supervisor runs one main child and is the reaper of everything below it.
type Supervisor struct {
	log       *slog.Logger
	grace     time.Duration
	straggler time.Duration // StragglerGrace

	sigs      chan os.Signal // from signal.Notify: SIGCHLD and the forwarded signals
	signalled chan os.Signal // copies of the forwarded signals, for the agent
	stopReq   chan struct{}  // closed by Stop
	stopOnce  sync.Once
	restarts  chan startRequest  // to the run goroutine, which forks on its locked thread
	cycles    chan time.Duration // Cycle's requests (their grace) to the run goroutine
	stopping  chan struct{}      // closed at Stop or the first forwarded signal

	mu       sync.Mutex
	started  bool
	pid      int
	code     int
	done     chan struct{} // the current child's: closed when it and its group are gone
	stopSig  syscall.Signal
	stopSeen bool
}

// startRequest asks the run goroutine to start the next main child.
type startRequest struct {
	cmd    *exec.Cmd
	result chan error
}

// ErrStopping is Restart's answer once Stop was called or a terminating
// signal was forwarded: the child that ended was meant to end.
var ErrStopping = errors.New("supervisor is stopping")

// claimed makes a second Supervisor in the same process fail: two wait4(-1)
// reapers would steal each other's children.
var claimed atomic.Bool

// New returns a Supervisor; nothing happens until Start.
func New(cfg Config) *Supervisor {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	grace := cfg.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	straggler := cfg.StragglerGrace
	if straggler <= 0 {
		straggler = DefaultStragglerGrace
	}
	return &Supervisor{
		log:       log,
		grace:     grace,
		straggler: straggler,
		cycles:    make(chan time.Duration, 1),
		// SIGCHLDs coalesce anyway (one pending is enough, the reaper loops);
		// the room is for forwarded signals arriving while we reap.
		sigs:      make(chan os.Signal, 16),
		signalled: make(chan os.Signal, 8),
		stopReq:   make(chan struct{}),
		restarts:  make(chan startRequest),
		stopping:  make(chan struct{}),
		done:      make(chan struct{}),
		code:      -1,
	}
}

// Start becomes a child subreaper, installs the signal handlers and starts cmd
// in a new process group (Pdeathsig SIGKILL unless cmd sets one). It never
// calls cmd.Wait: the exit status arrives through Done and ExitCode. Give cmd
// *os.File (or nil) stdio: with other writers os/exec copies through
// goroutines that only Wait would clean up.
func (s *Supervisor) Start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("start supervisor: already started")
	}
	if !claimed.CompareAndSwap(false, true) {
		return errors.New("start supervisor: another supervisor runs in this process")
	}
	if err := becomeSubreaper(); err != nil {
		claimed.Store(false)
		return fmt.Errorf("start supervisor: %w", err)
	}
	// Handlers go in before the fork so neither the child's death nor a
	// SIGTERM arriving during startup is lost. As PID 1 they are also what
	// makes the kernel deliver SIGTERM/SIGINT/SIGHUP to us at all.
	signal.Notify(s.sigs, append([]os.Signal{syscall.SIGCHLD}, forwarded...)...)
	setGroup(cmd)

	started := make(chan error, 1)
	go s.startAndRun(cmd, started)
	if err := <-started; err != nil {
		signal.Stop(s.sigs)
		claimed.Store(false)
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	s.started = true
	s.pid = cmd.Process.Pid
	s.log.Info("supervisor started child", "pid", s.pid, "path", cmd.Path)
	return nil
}

// startAndRun forks from a goroutine locked to its OS thread and never
// unlocks: Linux fires Pdeathsig when the forking *thread* exits (golang/go#27505),
// and a locked goroutine that never returns keeps its thread alive.
func (s *Supervisor) startAndRun(cmd *exec.Cmd, started chan<- error) {
	runtime.LockOSThread()
	if err := cmd.Start(); err != nil {
		runtime.UnlockOSThread()
		started <- err
		return
	}
	pid := cmd.Process.Pid
	started <- nil
	s.run(pid)
}

// PID is the main child's pid (0 before Start).
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Stop asks the child's group to end: SIGTERM now, SIGKILL after the grace
// period. It returns at once; wait on Done. Calling it again does nothing.
func (s *Supervisor) Stop() {
	s.stopOnce.Do(func() { close(s.stopReq) })
}

// Cycle ends the current main child's group so that it can be restarted:
// SIGTERM now and SIGKILL after grace, or SIGKILL at once when grace is
// zero or less. Unlike Stop it is no stop: Stopping stays open and Restart
// works once Done closes. It returns at once; a child already gone is left
// alone.
func (s *Supervisor) Cycle(grace time.Duration) {
	select {
	case s.cycles <- grace:
	default: // one is pending already
	}
}

// Done is closed once the current main child has been reaped and its
// process group is empty (or did not empty within a grace period after
// SIGKILL). After a Restart, Done is the new child's: call it again.
func (s *Supervisor) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// ExitCode is the current main child's exit code, or 128+signal when a
// signal killed it. It is -1 before Done is closed.
func (s *Supervisor) ExitCode() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.code
}

// Signalled delivers each SIGTERM/SIGINT/SIGHUP the process received (after it
// was forwarded), so the agent knows it is shutting down. Signals are
// dropped, never blocking the supervisor, when nobody reads.
func (s *Supervisor) Signalled() <-chan os.Signal { return s.signalled }

// Restart starts cmd as the next main child, in a new process group, once
// the current one is done. It fails with ErrStopping after Stop or a
// forwarded signal (a restart then would undo the stop), and fails while
// the current child still runs. PID, Done and ExitCode then speak of cmd.
func (s *Supervisor) Restart(cmd *exec.Cmd) error {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		return errors.New("restart supervisor: not started")
	}
	setGroup(cmd)
	req := startRequest{cmd: cmd, result: make(chan error, 1)}
	s.restarts <- req // the run goroutine never stops listening
	if err := <-req.result; err != nil {
		return fmt.Errorf("restart %s: %w", cmd.Path, err)
	}
	s.log.Info("supervisor restarted child", "pid", s.PID(), "path", cmd.Path)
	return nil
}

// Stopping is closed once Stop was called or a terminating signal was
// forwarded: from then on the child is meant to end and Restart refuses.
func (s *Supervisor) Stopping() <-chan struct{} { return s.stopping }

// StopSignal is the signal that started the stop (0 for Stop, or when no
// stop began).
func (s *Supervisor) StopSignal() syscall.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopSig
}

// markStopping records the first cause of a stop. Only the run goroutine
// calls it, before it acts on the cause, so a Restart it serves later sees it.
func (s *Supervisor) markStopping(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopSeen {
		return
	}
	s.stopSeen, s.stopSig = true, sig
	close(s.stopping)
}
