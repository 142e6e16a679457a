package raylife

import (
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/rayvast/rayvast/agent/supervise"
	"github.com/rayvast/rayvast/internal/wire"
)

// Run waits on Ray and restarts it until a stop, a signal or a crash loop,
// and returns the agent's exit code: Ray's last code, or 128+signal when a
// signal came while no Ray ran (during a backoff). crashloop says Run gave
// up and reported it.
func (r *Ray) Run() (code int, crashloop bool) {
	defer close(r.final)
	for {
		<-r.sup.Done()
		code = r.sup.ExitCode()
		r.mu.Lock()
		r.status.State, r.status.ExitCode = wire.RayExited, &code
		r.stopJoinTimer()
		why := r.head.cycling
		r.mu.Unlock()
		if r.stopping() {
			return code, false // the stop or signal ended Ray: its code stands
		}
		var out restartOutcome
		if why == "" {
			r.askHead() // a drain begun since the last heartbeat (drain.go)
		}
		switch {
		case r.draining():
			out = r.heldAfterDrain(code)
		case why != "":
			out = r.restartNow(why)
		default:
			r.log.Warn("ray exited on its own", "exit_code", code, "restarts", r.restarts.Total())
			r.report(wire.EventRayExited, fmt.Sprintf("exit code %d", code))
			out = r.restartAfterBackoff(code)
		}
		switch out {
		case crashLoop:
			return code, true
		case stoppedIdle:
			if sig := r.sup.StopSignal(); sig != 0 {
				return 128 + int(sig), false
			}
			return code, false
		}
	}
}

func (r *Ray) stopping() bool {
	select {
	case <-r.sup.Stopping():
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
func (r *Ray) restartNow(why string) restartOutcome {
	if !r.waitForHead() {
		return stoppedIdle
	}
	if r.draining() {
		return r.heldAfterDrain(-1)
	}
	r.restarts.Forced()
	if out, done := r.startAgain(why); done {
		return out
	}
	return r.restartAfterBackoff(-1)
}

// restartAfterBackoff waits out the policy's delay and starts Ray again,
// counting a failed start as another exit.
func (r *Ray) restartAfterBackoff(code int) restartOutcome {
	for {
		delay, ok := r.restarts.Exited(r.now())
		if !ok {
			n := r.restarts.Total()
			r.log.Error("ray crash loop: giving up", "restarts", n, "exit_code", code)
			r.report(wire.EventRayCrashloop, fmt.Sprintf("exit code %d after %d restarts", code, n))
			return crashLoop
		}
		r.log.Info("restarting ray", "in", delay, "restart", r.restarts.Total())
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.head.kick: // the Ray head restarted: no reason to wait longer
			t.Stop()
		case <-r.sup.Stopping():
			t.Stop()
			return stoppedIdle
		}
		if r.draining() { // the head began a drain during the backoff
			return r.heldAfterDrain(code)
		}
		if out, done := r.startAgain(""); done {
			return out
		}
	}
}

// startAgain starts Ray once more. done is false when the start failed
// (logged and reported as Ray's exit), so the caller backs off and tries
// again; otherwise out is how the restart ended.
func (r *Ray) startAgain(why string) (out restartOutcome, done bool) {
	err := r.start(why)
	switch {
	case err == nil:
		return restarted, true
	case errors.Is(err, supervise.ErrStopping):
		return stoppedIdle, true
	}
	r.log.Error("restarting ray failed", "err", err)
	r.report(wire.EventRayExited, "restart failed: "+err.Error())
	return 0, false
}

// start restarts Ray; why, when set, is the agent's own reason.
func (r *Ray) start(why string) error {
	var pid int
	err := r.launch(func(cmd *exec.Cmd) (int, error) {
		err := r.sup.Restart(cmd)
		pid = r.sup.PID()
		return pid, err
	})
	if err != nil {
		return err
	}
	n := r.restarts.Total()
	detail := fmt.Sprintf("restart %d, pid %d", n, pid)
	if why != "" {
		detail += ": " + why
	}
	r.log.Info("ray restarted", "pid", pid, "restarts", n, "why", why)
	r.report(wire.EventRayRestarted, detail)
	return nil
}
