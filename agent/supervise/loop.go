package supervise

import (
	"errors"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// drainPoll is how often we look whether the group emptied while stragglers
// die. Reaping usually notices first; this covers members reaped by their
// own parents, whose deaths send us no SIGCHLD.
const drainPoll = 50 * time.Millisecond

// group is the state of the main child and its process group. Only the run
// goroutine touches it, so it needs no lock.
type group struct {
	s          *Supervisor
	done       chan struct{} // closed by finish
	pid, pgid  int
	code       int  // the main child's, once mainExited
	mainExited bool // reaped: the code is known
	finished   bool // Done is closed; the pgid may now be reused by strangers
	killSent   bool

	grace    *time.Timer // from the first SIGTERM to SIGKILL
	graceLen time.Duration
	drain    *time.Ticker // while stragglers remain after the main child exited
	giveUp   *time.Timer  // after SIGKILL, how long we wait for the group to empty
}

// run is the supervisor's single goroutine. It never returns: after the main
// child is done it keeps reaping orphans and reporting signals for as long
// as the process lives.
func (s *Supervisor) run(pid int) {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	// Setpgid with Pgid 0 (or Setsid) made the child its group's leader.
	g := &group{s: s, done: done, pid: pid, pgid: pid, code: -1}
	stopReq := s.stopReq
	// A child that died before this goroutine ran left a SIGCHLD pending in
	// s.sigs, but a first sweep costs nothing.
	g.reap()
	for {
		select {
		case sig := <-s.sigs:
			if sig == syscall.SIGCHLD {
				g.reap()
				continue
			}
			s.markStopping(sig.(syscall.Signal))
			g.forward(sig.(syscall.Signal))
		case <-stopReq:
			stopReq = nil
			s.markStopping(0)
			s.log.Info("supervisor stopping child group", "pgid", g.pgid)
			g.terminate(syscall.SIGTERM, s.grace)
		case grace := <-s.cycles:
			switch {
			case g.finished:
			case grace <= 0:
				s.log.Info("supervisor cycling child group: killing it", "pgid", g.pgid)
				g.kill()
			default:
				s.log.Info("supervisor cycling child group", "pgid", g.pgid, "grace", grace.String())
				g.terminate(syscall.SIGTERM, grace)
			}
		case req := <-s.restarts:
			next, err := g.restart(req.cmd)
			if err == nil {
				g = next
			}
			req.result <- err
		case <-timerC(g.grace):
			g.grace = nil
			g.kill()
		case <-tickerC(g.drain):
			g.finishIfEmpty()
		case <-timerC(g.giveUp):
			g.giveUp = nil
			s.log.Warn("supervisor child group survived SIGKILL; giving up on it", "pgid", g.pgid)
			g.finish()
		}
	}
}

// restart starts the next main child once this group is finished. It runs
// on the run goroutine, whose locked thread Pdeathsig is tied to.
func (g *group) restart(cmd *exec.Cmd) (*group, error) {
	s := g.s
	select {
	case <-s.stopping:
		return nil, ErrStopping
	default:
	}
	if !g.finished {
		return nil, errors.New("the current child still runs")
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	next := &group{s: s, done: make(chan struct{}), pid: pid, pgid: pid, code: -1}
	s.mu.Lock()
	s.pid, s.code, s.done = pid, -1, next.done
	s.mu.Unlock()
	next.reap() // it may already have died: its SIGCHLD is then pending too
	return next, nil
}

// forward passes a signal the agent received on to the group and to the
// agent's Signalled channel.
func (g *group) forward(sig syscall.Signal) {
	select {
	case g.s.signalled <- sig:
	default: // nobody listens; the supervisor must not block on the agent
	}
	if !g.finished {
		g.s.log.Info("supervisor forwarding signal", "signal", sig.String(), "pgid", g.pgid)
	}
	g.terminate(sig, g.s.grace)
}

// terminate signals the group and starts the grace clock the first time;
// a shorter grace than the one running replaces it.
func (g *group) terminate(sig syscall.Signal, grace time.Duration) {
	if g.finished {
		return // the group is gone and its pgid may be someone else's
	}
	if err := signalGroup(g.pgid, sig); err != nil {
		g.s.log.Warn("supervisor signal group", "pgid", g.pgid, "signal", sig.String(), "err", err)
	}
	if g.killSent {
		return
	}
	if g.grace == nil || grace < g.graceLen {
		if g.grace != nil {
			g.grace.Stop()
		}
		g.grace, g.graceLen = time.NewTimer(grace), grace
	}
}

// kill ends the grace period.
func (g *group) kill() {
	if g.finished {
		return
	}
	if g.graceLen > 0 {
		g.s.log.Warn("supervisor grace period over; killing child group", "pgid", g.pgid, "grace", g.graceLen.String())
	}
	if err := signalGroup(g.pgid, syscall.SIGKILL); err != nil {
		g.s.log.Warn("supervisor kill group", "pgid", g.pgid, "err", err)
	}
	g.killSent = true
	if g.mainExited && g.giveUp == nil {
		g.giveUp = time.NewTimer(g.s.grace)
	}
}

// reap collects every zombie, ours by birth or by orphaning, and notices the
// main child among them.
func (g *group) reap() {
	reapAll(func(pid int, ws unix.WaitStatus) {
		if pid != g.pid {
			g.s.log.Debug("supervisor reaped orphan", "pid", pid, "code", exitCode(ws))
			return
		}
		g.mainExit(ws)
	})
	g.finishIfEmpty()
}

// mainExit records the main child's status and turns on the stragglers
// left in its group: Ray's workers must not outlive Ray.
func (g *group) mainExit(ws unix.WaitStatus) {
	g.mainExited = true
	g.code = exitCode(ws)
	g.s.log.Info("supervisor child exited", "pid", g.pid, "code", g.code)
	if groupEmpty(g.pgid) {
		return // finishIfEmpty closes Done
	}
	if g.grace == nil && !g.killSent {
		g.s.log.Info("supervisor terminating stragglers in child group", "pgid", g.pgid, "grace", g.s.straggler.String())
		g.terminate(syscall.SIGTERM, g.s.straggler)
	}
	if g.killSent && g.giveUp == nil {
		g.giveUp = time.NewTimer(g.s.grace)
	}
	g.drain = time.NewTicker(drainPoll)
}

func (g *group) finishIfEmpty() {
	if g.mainExited && !g.finished && groupEmpty(g.pgid) {
		g.finish()
	}
}

// finish publishes the exit code and closes Done.
func (g *group) finish() {
	if g.finished {
		return
	}
	g.finished = true
	for _, t := range []*time.Timer{g.grace, g.giveUp} {
		if t != nil {
			t.Stop()
		}
	}
	g.grace, g.giveUp = nil, nil
	if g.drain != nil {
		g.drain.Stop()
		g.drain = nil
	}
	g.s.mu.Lock()
	g.s.code = g.code
	g.s.mu.Unlock()
	close(g.done)
}

// timerC and tickerC let a nil timer stand for "not running" in a select.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

func tickerC(t *time.Ticker) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}
