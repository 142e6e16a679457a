package reconcile

import (
	"fmt"

	"github.com/rayvast/rayvast/internal/wire"
)

// When Ray's autoscaler owns the count (Config.RayScales), it creates and
// ends candidates through the plugin and the loop must not fight it: no
// candidate is created to reach min_workers (Ray keeps min_workers itself)
// and none is ended above max_workers. What stays the head's: lost nodes
// and candidates that do not enroll in time are ended (tally), and each
// candidate that failed (its checks, the enroll timeout, lost) is replaced
// once by a spare of its type, so Ray is not left a node short while it
// waits to notice. The spare is listed to Ray like any candidate of the
// type; if Ray also replaced the failure, the extra node enrolls idle and
// Ray ends it after its idle timeout.

// noteFailure records a failed candidate of a tally for replacement when
// it failed while this loop ran and has not been replaced yet.
func (p *pass) noteFailure(t *tally, c wire.Candidate, endedNow bool) {
	l := p.l
	if !l.cfg.RayScales {
		return
	}
	p.failedSeen[c.CandidateID] = true
	if l.replaced[c.CandidateID] || (!endedNow && c.UpdatedAt.Before(l.started)) {
		return
	}
	t.toReplace = append(t.toReplace, c.CandidateID)
}

// replaceFailed rents one spare of node type n for each failure noted,
// unless renting is paused, the cluster is at budget, the provider is
// halted, spares are off, or the type is at max_workers.
func (p *pass) replaceFailed(n string, cands []wire.Candidate) {
	l := p.l
	nt, t := l.cfg.NodeTypes[n], p.types[n]
	if l.pause(n, t.failedLong, t.reasons) || l.atBudget(cands) || p.halted || l.cfg.Spares == 0 {
		return
	}
	for _, failed := range t.toReplace {
		if t.enrolled+len(t.inflight) >= nt.MaxWorkers {
			return
		}
		c, err := l.cfg.Cluster.Create(p.ctx, n)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("create %s candidate: %w", n, err))
			return
		}
		l.replaced[failed] = true
		t.inflight = append(t.inflight, c)
		p.live[c.CandidateID] = c
		p.res.Created[n]++
		l.cfg.Log.Info("reconcile: rented a spare for a failed candidate (Ray's autoscaler owns the count)",
			"candidate", c.CandidateID, "failed", failed, "node_type", n, "enrolled", t.enrolled, "in_flight", len(t.inflight))
	}
}

// forgetReplaced drops failures no longer listed (pruned) or too old to
// count: nothing will ask about them again.
func (p *pass) forgetReplaced() {
	for id := range p.l.replaced {
		if !p.failedSeen[id] {
			delete(p.l.replaced, id)
		}
	}
}
