package heartbeat

import (
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/internal/wire"
)

// loop is what Run keeps from one heartbeat to the next. Each field of a
// head's answer has its own handler below; answered calls them in one
// fixed order (the interval first: a soon wait is the lesser of the two).
type loop struct {
	cfg      Config
	interval time.Duration  // the head's latest, bounded
	retry    backoff.Policy // after a failed heartbeat, up to interval
	failures int            // heartbeats failed in a row
	stopped  bool           // the head's stop was passed on (once)
}

// failed is a heartbeat with no answer: the wait before the next, backing
// off up to the interval.
func (l *loop) failed(seq int64, err error) time.Duration {
	l.failures++
	l.retry.Max = l.interval
	wait := l.retry.Delay(l.failures - 1)
	l.cfg.Log.Warn("heartbeat failed", "seq", seq, "failures", l.failures, "retry_in", wait.Round(time.Millisecond), "err", err)
	return wait
}

// answered handles each field of the head's answer to hb and returns the
// wait before the next heartbeat (wait, unless the answer changes it).
func (l *loop) answered(hb wire.Heartbeat, reply wire.HeartbeatReply, wait time.Duration) time.Duration {
	if l.failures > 0 {
		l.cfg.Log.Info("heartbeat back", "seq", hb.Seq, "after_failures", l.failures)
	}
	l.failures = 0
	if l.onInterval(reply.IntervalS) {
		wait = backoff.Jitter(l.interval, Jitter, l.cfg.Rand)
	}
	l.cfg.Log.Debug("heartbeat", "seq", hb.Seq, "ray", hb.Ray.State, "action", reply.Action)
	if l.onRayHead(reply.RayHead) {
		wait = min(wait, backoff.Jitter(SoonInterval, Jitter, l.cfg.Rand))
	}
	if l.cfg.OnDrain != nil {
		l.cfg.OnDrain(reply.Drain)
	}
	l.onMesh(reply.Mesh)
	l.onAction(reply.Action, hb.Seq)
	return wait
}

// onInterval takes the head's interval_s, when it names one; changed says
// it differs from the one the wait was drawn for.
func (l *loop) onInterval(seconds int) (changed bool) {
	d, ok := IntervalOf(seconds)
	if !ok || d == l.interval {
		return false
	}
	l.interval = d
	return true
}

// onRayHead passes the Ray head the answer names ("" none) to OnRayHead;
// true asks for the next heartbeat soon.
func (l *loop) onRayHead(head *wire.RayHeadRun) (soon bool) {
	if l.cfg.OnRayHead == nil {
		return false
	}
	id := ""
	if head != nil {
		id = head.ID
	}
	return l.cfg.OnRayHead(id)
}

// onMesh gives a new mesh membership to the node's mesh.
func (l *loop) onMesh(m *wire.MeshMembers) {
	if l.cfg.Mesh != nil && m != nil {
		l.cfg.Mesh.Update(*m)
	}
}

// onAction passes the head's stop on, once.
func (l *loop) onAction(action string, seq int64) {
	if action == wire.ActionStop && !l.stopped {
		l.stopped = true
		l.cfg.Log.Info("head asked to stop ray", "seq", seq)
		if l.cfg.OnStop != nil {
			l.cfg.OnStop()
		}
	}
}
