package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// A planned end of an enrolled node (`head down`, a contract's end after
// its replacement enrolled) is a drain first: the loop asks Ray to drain
// the node (reason preemption, with a deadline), keeps the candidate live
// and its rental rented while Ray moves work off it, and ends it once Ray
// shows the node drained or the deadline passed. Ray then stops scheduling
// on the node and its running tasks and actors get until the deadline to
// finish (Ray Train on 2.60 sees the notice in get_preemption_info()). A
// drain Ray refuses or cannot be asked for (its head down, the node not
// known to it) is logged and the node ended at the deadline all the same:
// a planned end is never held up longer than that. Unplanned ends (lost,
// vanished, an outbid pause: vast gives no notice) are not drained: the
// node is gone already.

// Drainer asks Ray to drain a node and reads whether it did.
type Drainer interface {
	// Drain asks Ray to drain c's node with reason preemption, telling it
	// the node is ended at deadline; why is the loop's end reason.
	// ErrNoRay: no Ray head to ask (rayvast runs none): end at once.
	Drain(ctx context.Context, c wire.Candidate, why string, deadline time.Time) error
	// Drained reports whether Ray shows c's node drained: no longer alive,
	// nothing of the cluster's work left running on it.
	Drained(ctx context.Context, c wire.Candidate) (bool, error)
}

// ErrNoRay is what a Drainer returns when there is no Ray to drain with:
// waiting out the deadline would only delay the end.
var ErrNoRay = errors.New("no Ray head to drain with")

// DefaultDrainDeadline is how long a planned end waits for Ray's drain.
const DefaultDrainDeadline = 2 * time.Minute

// drainState is one node being drained.
type drainState struct {
	instance string // told through Config.Drains
	deadline time.Time
	failed   bool // Ray did not take the drain: end at the deadline
}

// endPlanned ends c for a planned reason, draining it first when it is an
// enrolled node and a Drainer is set. It reports whether c was ended in
// this pass; while it drains, c stays live and its rental kept.
func (p *pass) endPlanned(c wire.Candidate, reason string) bool {
	l := p.l
	if l.cfg.Drainer == nil || c.State != wire.StateEnrolled {
		p.end(c, reason)
		return p.res.Ended[c.CandidateID] != ""
	}
	log := l.cfg.Log.With("candidate", c.CandidateID, "instance", c.InstanceID, "reason", reason)
	d, ok := l.drains[c.CandidateID]
	if !ok {
		d = &drainState{instance: c.InstanceID, deadline: p.now.Add(l.cfg.DrainDeadline)}
		// Never past the contract's own end: vast stops the rental then.
		if e, ok := l.ends[c.CandidateID]; ok && e.After(p.now) && e.Before(d.deadline) {
			d.deadline = e
		}
		err := l.cfg.Drainer.Drain(p.ctx, c, reason, d.deadline)
		switch {
		case errors.Is(err, ErrNoRay):
			log.Info("reconcile: no Ray head to drain the node with; ending it now")
			p.end(c, reason)
			return p.res.Ended[c.CandidateID] != ""
		case err != nil:
			d.failed = true
			log.Warn("reconcile: Ray did not take the drain; the node is ended at the deadline", "deadline", d.deadline, "err", err)
		default:
			log.Info("reconcile: draining the node in Ray before its rental ends", "deadline", d.deadline)
		}
		l.drains[c.CandidateID] = d
		l.cfg.Drains.set(d.instance, d.deadline, true) // the node hears it in its next heartbeat answer
		return false
	}
	switch {
	case !p.now.Before(d.deadline):
		if !d.failed {
			log.Warn("reconcile: the drain's deadline passed with work still on the node; ending it")
		}
	case d.failed:
		return false
	default:
		done, err := l.cfg.Drainer.Drained(p.ctx, c)
		if err != nil {
			log.Debug("reconcile: reading the drain", "err", err)
		}
		if !done {
			return false
		}
		log.Info("reconcile: Ray drained the node; ending it")
	}
	p.end(c, reason)
	if p.res.Ended[c.CandidateID] == "" {
		return false // retried next pass; the drain is kept
	}
	l.dropDrain(c.CandidateID)
	return true
}

// dropDrain forgets candidate id's drain, for the loop and port B.
func (l *Loop) dropDrain(id string) {
	if d, ok := l.drains[id]; ok {
		l.cfg.Drains.set(d.instance, time.Time{}, false)
		delete(l.drains, id)
	}
}

// draining reports whether candidate id is being drained.
func (l *Loop) draining(id string) bool { _, ok := l.drains[id]; return ok }

// forgetDrains drops the drains of candidates no longer live (lost,
// vanished or ended by someone else meanwhile).
func (l *Loop) forgetDrains(live map[string]wire.Candidate) {
	for id := range l.drains {
		if _, ok := live[id]; !ok {
			l.dropDrain(id)
		}
	}
}
