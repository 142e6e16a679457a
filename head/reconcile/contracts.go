package reconcile

import (
	"math"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
)

// A rental's contract ends at a date (vast's end_date; the instance is
// stopped then). An enrolled node whose contract ends within
// Config.ReplaceBefore gets a replacement candidate of its type, rented
// first and not counted toward the node type's size while in flight; once
// it enrolled, the node is drained in Ray and ended (contract_end). A replacement that fails
// is retried on a later tick; a node that reaches its end date first is
// stopped by vast and ended then (contract_ended), the replacement kept.

// noteEnds keeps each candidate's end date from a sweep's rentals.
func (l *Loop) noteEnds(rentals []provider.Rental) {
	l.ends = map[string]time.Time{}
	for _, r := range rentals {
		if !r.EndsAt.IsZero() {
			l.ends[r.CandidateID] = r.EndsAt
		}
	}
}

// expiring: c's contract ends within ReplaceBefore.
func (p *pass) expiring(c wire.Candidate) bool {
	e, ok := p.l.ends[c.CandidateID]
	return p.l.cfg.ReplaceBefore > 0 && ok && !p.now.Before(e.Add(-p.l.cfg.ReplaceBefore))
}

// replaceExpiring rents a replacement for each enrolled node of type n
// whose contract ends soon (unless renting is paused, halted or at
// budget), and ends the node once its replacement enrolled.
func (p *pass) replaceExpiring(n string, cands []wire.Candidate) {
	l, t := p.l, p.types[n]
	for _, c := range cands {
		if c.NodeType != n || c.State != wire.StateEnrolled || p.live[c.CandidateID].State != wire.StateEnrolled || !p.expiring(c) {
			continue
		}
		rep, ok := l.replacing[c.CandidateID]
		switch {
		case ok && p.live[rep].State == wire.StateEnrolled:
			if !p.endPlanned(c, ReasonContractEnd) {
				continue // draining in Ray first (drain.go)
			}
			delete(p.live, c.CandidateID)
			t.enrolled--
			delete(l.replacing, c.CandidateID)
			delete(l.replacement, rep)
		case ok && p.live[rep].CandidateID != "":
			// in flight
		case p.halted || l.paused[n] || l.atBudget(cands):
			// rented later, or the node is ended at its end date
		default:
			r, err := l.cfg.Cluster.Create(p.ctx, n)
			if err != nil {
				p.errs = append(p.errs, err)
				return
			}
			if ok {
				delete(l.replacement, rep) // the last one failed
			}
			l.replacing[c.CandidateID], l.replacement[r.CandidateID] = r.CandidateID, true
			p.live[r.CandidateID] = r
			p.res.Created[n]++
			l.cfg.Log.Info("reconcile: contract ends soon; renting a replacement first", "candidate", c.CandidateID,
				"instance", c.InstanceID, "ends_at", l.ends[c.CandidateID], "replacement", r.CandidateID)
		}
	}
}

// forgetReplacements drops the pairs whose node is no longer live (ended
// at its end date, or lost): its replacement is then a node like others.
func (l *Loop) forgetReplacements(live map[string]wire.Candidate) {
	for old, rep := range l.replacing {
		if _, ok := live[old]; !ok {
			delete(l.replacing, old)
			delete(l.replacement, rep)
		}
	}
	for rep := range l.replacement {
		if c, ok := live[rep]; !ok || c.State == wire.StateEnrolled && !l.isReplacing(rep) {
			delete(l.replacement, rep)
		}
	}
}

func (l *Loop) isReplacing(rep string) bool {
	for _, r := range l.replacing {
		if r == rep {
			return true
		}
	}
	return false
}

// reprice records the new price of each live candidate whose rental the
// sweep shows at another $/hour than recorded (a price increase accepted);
// a candidate with no recorded price is left alone.
func (p *pass) reprice() {
	rp, ok := p.l.cfg.Cluster.(Repricer)
	if !ok {
		return
	}
	for id, c := range p.live {
		r, ok := p.rentals[id]
		if !ok || r.InstanceID != c.InstanceID || r.DPHTotal <= 0 || c.DPHTotal <= 0 || math.Abs(r.DPHTotal-c.DPHTotal) < 1e-9 {
			continue
		}
		if err := rp.Reprice(p.ctx, id, r.DPHTotal); err != nil {
			p.errs = append(p.errs, err)
			continue
		}
		p.l.cfg.Log.Info("reconcile: a rental's price changed", "candidate", id, "instance", c.InstanceID, "old_dph", c.DPHTotal, "dph_total", r.DPHTotal)
	}
}
