package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"github.com/rayvast/rayvast/agent/envconfig"
	"github.com/rayvast/rayvast/agent/supervise"
	"github.com/rayvast/rayvast/internal/wire"
)

// restartPolicy is the environment's knobs over the defaults.
func restartPolicy(k envconfig.Restart) supervise.RestartPolicy {
	p := supervise.DefaultRestartPolicy()
	if k.MaxRestarts >= 0 {
		p.MaxRestarts = k.MaxRestarts
	}
	if k.Window > 0 {
		p.Window = k.Window
	}
	if k.Delay > 0 {
		p.Delay = k.Delay
	}
	return p
}

// rayLoop is Ray under the restart policy (SPEC §9): it restarts Ray when
// it exits on its own, reports each exit and restart, and ends on a stop,
// a signal or a crash loop. Its status feeds heartbeats and the guest API.
type rayLoop struct {
	sup      *supervise.Supervisor
	command  func() (*exec.Cmd, func(), error) // a fresh Cmd, same argv and env
	restarts *supervise.Restarts
	report   func(event, detail string) // queued, in order; never blocks long
	log      *slog.Logger
	now      func() time.Time

	mu     sync.Mutex
	status wire.RayStatus
	final  chan struct{} // closed when the loop has decided to end
}

func newRayLoop(sup *supervise.Supervisor, policy supervise.RestartPolicy, command func() (*exec.Cmd, func(), error),
	report func(event, detail string), log *slog.Logger) *rayLoop {
	return &rayLoop{sup: sup, command: command, restarts: supervise.NewRestarts(policy), report: report, log: log,
		now: time.Now, final: make(chan struct{}), status: wire.RayStatus{State: wire.RayStarting}}
}

// started records the first start.
func (l *rayLoop) started() {
	pid := l.sup.PID()
	l.set(func(s *wire.RayStatus) { s.State, s.PID = wire.RayRunning, pid })
}

// Status is what heartbeats and the guest API say of Ray.
func (l *rayLoop) Status() wire.RayStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.status
	if st.ExitCode != nil {
		c := *st.ExitCode
		st.ExitCode = &c
	}
	return st
}

// Final is closed once Ray is gone for good.
func (l *rayLoop) Final() <-chan struct{} { return l.final }

func (l *rayLoop) set(f func(*wire.RayStatus)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.status)
}

// run waits on Ray and restarts it until a stop, a signal or a crash loop,
// and returns the agent's exit code: Ray's last code, or 128+signal when a
// signal came while no Ray ran (during a backoff).
func (l *rayLoop) run() (code int, crashloop bool) {
	defer close(l.final)
	for {
		<-l.sup.Done()
		code = l.sup.ExitCode()
		l.set(func(s *wire.RayStatus) { s.State, s.ExitCode = wire.RayExited, &code })
		if l.stopping() {
			return code, false // the stop or signal ended Ray: its code stands
		}
		l.log.Warn("ray exited on its own", "exit_code", code, "restarts", l.restarts.Total())
		l.report(wire.EventRayExited, fmt.Sprintf("exit code %d", code))
		switch l.restartAfterBackoff(code) {
		case crashLoop:
			return code, true
		case stoppedIdle:
			if sig := l.sup.StopSignal(); sig != 0 {
				return 128 + int(sig), false
			}
			return code, false
		}
	}
}

func (l *rayLoop) stopping() bool {
	select {
	case <-l.sup.Stopping():
		return true
	default:
		return false
	}
}

type restartOutcome int

const (
	restarted restartOutcome = iota
	crashLoop
	stoppedIdle // a stop or signal came while no Ray ran
)

// restartAfterBackoff waits out the policy's delay and starts Ray again,
// counting a failed start as another exit.
func (l *rayLoop) restartAfterBackoff(code int) restartOutcome {
	for {
		delay, ok := l.restarts.Exited(l.now())
		if !ok {
			n := l.restarts.Total()
			l.log.Error("ray crash loop: giving up", "restarts", n, "exit_code", code)
			l.report(wire.EventRayCrashloop, fmt.Sprintf("exit code %d after %d restarts", code, n))
			return crashLoop
		}
		l.log.Info("restarting ray", "in", delay, "restart", l.restarts.Total())
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-l.sup.Stopping():
			t.Stop()
			return stoppedIdle
		}
		err := l.start()
		switch {
		case err == nil:
			return restarted
		case errors.Is(err, supervise.ErrStopping):
			return stoppedIdle
		}
		l.log.Error("restarting ray failed", "err", err)
		l.report(wire.EventRayExited, "restart failed: "+err.Error())
	}
}

func (l *rayLoop) start() error {
	cmd, started, err := l.command()
	if err != nil {
		return err
	}
	err = l.sup.Restart(cmd)
	started()
	if err != nil {
		return err
	}
	n, pid := l.restarts.Total(), l.sup.PID()
	l.set(func(s *wire.RayStatus) { *s = wire.RayStatus{State: wire.RayRunning, PID: pid, Restarts: n} })
	l.log.Info("ray restarted", "pid", pid, "restarts", n)
	l.report(wire.EventRayRestarted, fmt.Sprintf("restart %d, pid %d", n, pid))
	return nil
}

// reportQueue delivers reports to the head one at a time, in order, off the
// restart loop's path: a head that is away must not delay Ray's restart.
type reportQueue struct {
	ch   chan wire.Report
	done chan struct{}
	log  *slog.Logger
}

func newReportQueue(send func(event, detail string), log *slog.Logger) *reportQueue {
	q := &reportQueue{ch: make(chan wire.Report, 64), done: make(chan struct{}), log: log}
	go func() {
		defer close(q.done)
		for r := range q.ch {
			send(r.Event, r.Detail)
		}
	}()
	return q
}

// add queues one report; with the queue full (a head away for long) it is
// dropped and logged: the heartbeat still carries the restart count.
func (q *reportQueue) add(event, detail string) {
	select {
	case q.ch <- wire.Report{Event: event, Detail: detail}:
	default:
		q.log.Warn("report queue full: dropping report", "event", event)
	}
}

// close delivers what is queued, waiting at most limit.
func (q *reportQueue) close(limit time.Duration) {
	close(q.ch)
	select {
	case <-q.done:
	case <-time.After(limit):
		q.log.Warn("reports not all delivered before exit")
	}
}
