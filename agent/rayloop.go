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

// holdForHead bounds how long a Ray ended because its Ray head is gone
// waits for the head to name a new one before it starts anyway.
const holdForHead = 2 * time.Minute

// DefaultJoinTimeout bounds how long Ray may take from its start to
// joining the cluster before the agent reports that it did not join (with
// Ray's last words). Ray's own start gives up after about a minute (its
// GCS connect retries, then 30 s for the raylet to register).
const DefaultJoinTimeout = 2 * time.Minute

// rayLoop is Ray under the restart policy (docs/protocol.md §9): it restarts Ray when
// it exits on its own, reports each exit and restart, and ends on a stop,
// a signal or a crash loop. Its status feeds heartbeats and the guest API:
// starting from each start of Ray until Ray says its node joined the
// cluster, then running. When the head names a new Ray head, Ray is
// restarted at once (Ray joined a Ray head that is gone).
type rayLoop struct {
	sup *supervise.Supervisor
	// command is a fresh Cmd, same argv and env; joined is called once Ray
	// says its node is in the cluster.
	command     func(joined func()) (*exec.Cmd, func(), error)
	restarts    *supervise.Restarts
	report      func(event, detail string) // queued, in order; never blocks long
	lastWords   func() string              // the end of Ray's output
	joinTimeout time.Duration
	log         *slog.Logger
	now         func() time.Time

	mu        sync.Mutex
	status    wire.RayStatus
	gen       int       // counts starts of Ray; a joined call of an older start is stale
	liveGen   int       // the start whose process runs (launch recorded it)
	joinedGen int       // the latest start that said it joined
	startedAt time.Time // of the current start
	joinTimer *time.Timer
	headID    string        // the Ray head Ray joined ("" unknown)
	headDown  bool          // the head stopped naming headID; the next one named is Ray's
	headBack  chan struct{} // a Ray head is named again after headDown
	cycling   string        // why the agent itself is ending Ray to restart it ("" not)
	kick      chan struct{}
	final     chan struct{} // closed when the loop has decided to end
}

func newRayLoop(sup *supervise.Supervisor, policy supervise.RestartPolicy, command func(joined func()) (*exec.Cmd, func(), error),
	report func(event, detail string), lastWords func() string, log *slog.Logger) *rayLoop {
	return &rayLoop{sup: sup, command: command, restarts: supervise.NewRestarts(policy), report: report, lastWords: lastWords,
		joinTimeout: DefaultJoinTimeout, log: log, now: time.Now, final: make(chan struct{}), kick: make(chan struct{}, 1), headBack: make(chan struct{}, 1),
		status: wire.RayStatus{State: wire.RayStarting}}
}

// startFirst starts Ray the first time.
func (l *rayLoop) startFirst() error {
	return l.launch(func(cmd *exec.Cmd) (int, error) {
		err := l.sup.Start(cmd)
		return l.sup.PID(), err
	})
}

// launch builds Ray's command for a new start and runs it through start,
// then records the start: starting, and the join bound armed.
func (l *rayLoop) launch(start func(*exec.Cmd) (int, error)) error {
	l.mu.Lock()
	l.gen++
	gen := l.gen
	l.mu.Unlock()
	cmd, started, err := l.command(func() { l.joined(gen) })
	if err != nil {
		return err
	}
	pid, err := start(cmd)
	started()
	if err != nil {
		return err
	}
	n := l.restarts.Total()
	l.mu.Lock()
	l.liveGen, l.cycling = gen, ""
	l.status = wire.RayStatus{State: wire.RayStarting, PID: pid, Restarts: n}
	if l.joinedGen == gen { // Ray said so before we got here
		l.status.State = wire.RayRunning
	}
	l.startedAt = l.now()
	if l.joinTimer != nil {
		l.joinTimer.Stop()
	}
	l.joinTimer = time.AfterFunc(l.joinTimeout, func() { l.notJoined(gen) })
	l.mu.Unlock()
	return nil
}

// joined records that Ray of start gen said its node is in the cluster.
func (l *rayLoop) joined(gen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.joinedGen = max(l.joinedGen, gen)
	if gen != l.liveGen || l.status.State != wire.RayStarting {
		return
	}
	l.status.State = wire.RayRunning
	if l.joinTimer != nil {
		l.joinTimer.Stop()
	}
	l.log.Info("ray joined the cluster", "pid", l.status.PID, "after", l.now().Sub(l.startedAt).Round(time.Millisecond))
}

// notJoined reports a Ray of start gen that has not joined within the bound.
func (l *rayLoop) notJoined(gen int) {
	l.mu.Lock()
	stale := gen != l.liveGen || l.status.State != wire.RayStarting
	l.mu.Unlock()
	if stale {
		return
	}
	words := ""
	if l.lastWords != nil {
		words = l.lastWords()
	}
	l.log.Warn("ray has not joined the cluster", "after", l.joinTimeout, "ray_last_words", words)
	l.report(wire.EventRayNotJoined, fmt.Sprintf("not joined after %s; Ray's last words: %s", l.joinTimeout, words))
}

// RayHead is what the head's heartbeat answer says of the Ray head (""
// when it names none), and whether the next heartbeat should come soon.
//
// The first Ray head named is the one Ray joined. When the head stops
// naming it (it died; a new one is starting), Ray's cluster is gone: Ray is
// restarted at once, so that its `ray start` waits for the new GCS instead
// of Ray's raylet waiting 60 s for the old one, and heartbeats come soon
// until a Ray head is named again, which is then taken as the one Ray
// joins. A Ray head named with another ID (the whole change happened
// between two heartbeats) restarts Ray the same way.
func (l *rayLoop) RayHead(id string) (soon bool) {
	l.mu.Lock()
	prev, why := l.headID, ""
	switch {
	case id == "" && prev != "":
		l.headID, l.headDown = "", true
		why = "the Ray head is gone (" + prev + ")"
	case id == "":
	case prev == "":
		if l.headDown {
			select {
			case l.headBack <- struct{}{}:
			default:
			}
		}
		l.headID, l.headDown = id, false
	case prev != id:
		l.headID = id
		why = "the Ray head restarted (now " + id + ")"
	}
	cycle := why != "" && l.cycling == ""
	if cycle {
		l.cycling = why
	}
	soon = l.headDown
	l.mu.Unlock()
	if !cycle {
		return soon
	}
	l.log.Warn("restarting ray now", "why", why)
	select {
	case l.kick <- struct{}{}: // cuts a restart backoff short
	default:
	}
	l.sup.Cycle(0) // nothing to drain: its GCS is gone
	return soon
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
		l.mu.Lock()
		l.status.State, l.status.ExitCode = wire.RayExited, &code
		if l.joinTimer != nil {
			l.joinTimer.Stop()
		}
		why := l.cycling
		l.mu.Unlock()
		if l.stopping() {
			return code, false // the stop or signal ended Ray: its code stands
		}
		var out restartOutcome
		if why != "" {
			out = l.restartNow(why)
		} else {
			l.log.Warn("ray exited on its own", "exit_code", code, "restarts", l.restarts.Total())
			l.report(wire.EventRayExited, fmt.Sprintf("exit code %d", code))
			out = l.restartAfterBackoff(code)
		}
		switch out {
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

// restartNow starts Ray again at once after the agent ended it itself (the
// Ray head restarted): no backoff, and not counted toward a crash loop, since
// Ray did not fail. A failed start falls back to the backoff.
func (l *rayLoop) restartNow(why string) restartOutcome {
	l.mu.Lock()
	hold := l.headDown
	l.mu.Unlock()
	if hold {
		// Ray's start would wait for the new Ray head anyway (Ray 2.60's
		// `ray start` waits for the head's raylet); starting it now only
		// takes CPU from the Ray head where they share a machine.
		t := time.NewTimer(holdForHead)
		select {
		case <-l.headBack:
		case <-t.C:
		case <-l.sup.Stopping():
			t.Stop()
			return stoppedIdle
		}
		t.Stop()
	}
	l.restarts.Forced()
	err := l.start(why)
	switch {
	case err == nil:
		return restarted
	case errors.Is(err, supervise.ErrStopping):
		return stoppedIdle
	}
	l.log.Error("restarting ray failed", "err", err)
	l.report(wire.EventRayExited, "restart failed: "+err.Error())
	return l.restartAfterBackoff(-1)
}

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
		case <-l.kick: // the Ray head restarted: no reason to wait longer
			t.Stop()
		case <-l.sup.Stopping():
			t.Stop()
			return stoppedIdle
		}
		err := l.start("")
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

// start restarts Ray; why, when set, is the agent's own reason.
func (l *rayLoop) start(why string) error {
	var pid int
	err := l.launch(func(cmd *exec.Cmd) (int, error) {
		err := l.sup.Restart(cmd)
		pid = l.sup.PID()
		return pid, err
	})
	if err != nil {
		return err
	}
	n := l.restarts.Total()
	detail := fmt.Sprintf("restart %d, pid %d", n, pid)
	if why != "" {
		detail += ": " + why
	}
	l.log.Info("ray restarted", "pid", pid, "restarts", n, "why", why)
	l.report(wire.EventRayRestarted, detail)
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
