package reconcile

import (
	"context"
	"errors"
	"sync"
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
	c        wire.Candidate // its instance is told through Config.Drains
	deadline time.Time
	asked    bool // Ray was asked (startDrains); false: asked at the pass's end
	failed   bool // Ray did not take the drain: end at the deadline
}

// Several nodes drain at once, each to its own deadline: a pass asks Ray
// for every new drain together at its end (startDrains) and reads every
// drain already asked together at its start (readDrains), each call a run
// of the Ray head's Python of a second or two, so a pass with many nodes
// draining takes about as long as one.

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
		d = &drainState{c: c, deadline: p.now.Add(l.cfg.DrainDeadline)}
		// Never past the contract's own end: vast stops the rental then.
		if e, ok := l.ends[c.CandidateID]; ok && e.After(p.now) && e.Before(d.deadline) {
			d.deadline = e
		}
		l.drains[c.CandidateID] = d
		p.newDrains = append(p.newDrains, newDrain{id: c.CandidateID, reason: reason})
		return false
	}
	switch {
	case !d.asked:
		return false // asked at this pass's end
	case !p.now.Before(d.deadline):
		if !d.failed {
			log.Warn("reconcile: the drain's deadline passed with work still on the node; ending it")
		}
	case d.failed:
		return false
	default:
		if !p.drained[c.CandidateID] {
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

// newDrain is a drain begun in this pass, asked of Ray at its end.
type newDrain struct{ id, reason string }

// readDrains asks Ray, for every drain asked before this pass and not past
// its deadline, whether it shows the node drained, all at once.
func (p *pass) readDrains() {
	l := p.l
	p.drained = map[string]bool{}
	var ids []string
	for id, d := range l.drains {
		if d.asked && !d.failed && p.now.Before(d.deadline) {
			ids = append(ids, id)
		}
	}
	done := make([]bool, len(ids))
	parallel(len(ids), func(i int) {
		d := l.drains[ids[i]]
		ok, err := l.cfg.Drainer.Drained(p.ctx, d.c)
		if err != nil {
			l.cfg.Log.Debug("reconcile: reading the drain", "candidate", ids[i], "err", err)
		}
		done[i] = ok
	})
	for i, id := range ids {
		p.drained[id] = done[i]
	}
}

// startDrains asks Ray to drain every node whose drain began in this pass,
// all at once, each with its own deadline. A node with no Ray head to ask
// (ErrNoRay) is ended now, in this pass.
func (p *pass) startDrains() {
	l := p.l
	errs := make([]error, len(p.newDrains))
	parallel(len(p.newDrains), func(i int) {
		nd := p.newDrains[i]
		d := l.drains[nd.id]
		errs[i] = l.cfg.Drainer.Drain(p.ctx, d.c, nd.reason, d.deadline)
	})
	for i, nd := range p.newDrains {
		d := l.drains[nd.id]
		log := l.cfg.Log.With("candidate", nd.id, "instance", d.c.InstanceID, "reason", nd.reason)
		d.asked = true
		switch err := errs[i]; {
		case errors.Is(err, ErrNoRay):
			log.Info("reconcile: no Ray head to drain the node with; ending it now")
			delete(l.drains, nd.id)
			p.end(d.c, nd.reason)
			if p.res.Ended[nd.id] != "" {
				delete(p.live, nd.id)
			}
			continue
		case err != nil:
			d.failed = true
			log.Warn("reconcile: Ray did not take the drain; the node is ended at the deadline", "deadline", d.deadline, "err", err)
		default:
			log.Info("reconcile: draining the node in Ray before its rental ends", "deadline", d.deadline)
		}
		l.cfg.Drains.set(d.c.InstanceID, d.deadline, true) // the node hears it in its next heartbeat answer
	}
	p.newDrains = nil
}

// parallel runs f(0) … f(n-1) at once and waits for them all.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

// dropDrain forgets candidate id's drain, for the loop and port B.
func (l *Loop) dropDrain(id string) {
	if d, ok := l.drains[id]; ok {
		l.cfg.Drains.set(d.c.InstanceID, time.Time{}, false)
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
