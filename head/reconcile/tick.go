package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
)

// Tick runs one pass and returns what it did; errors of single calls are
// joined and the pass goes on. Its phases: list rentals and candidates,
// tally the candidates per node type (ending the lost, the late and, when
// down, all), scale each node type, destroy leaked rentals, sync the
// firewall.
func (l *Loop) Tick(ctx context.Context) (Result, error) {
	p := &pass{l: l, ctx: ctx, res: Result{Created: map[string]int{}, Ended: map[string]string{}}, failedSeen: map[string]bool{}}
	p.down = l.cfg.DownFile != "" && exists(l.cfg.DownFile)
	p.res.Down = p.down
	// Rentals first, candidates second: a candidate is made before its
	// rental, so every rental found has its candidate in the later list.
	rentals, swept := p.listRentals()
	cands, err := l.cfg.Cluster.Candidates(ctx)
	if err != nil {
		return p.res, fmt.Errorf("list candidates: %w", err)
	}
	p.now = l.cfg.Now()
	p.rentals = map[string]provider.Rental{}
	for _, r := range rentals {
		p.rentals[r.CandidateID] = r
	}
	if swept {
		l.noteEnds(rentals)
	}
	p.halted = !p.down && l.providerHalted()
	if l.cfg.Drainer != nil {
		p.readDrains() // every drain asked before, at once (drain.go)
	}
	p.tally(cands)
	if swept && !p.down {
		p.reprice()
	}
	l.forgetSpares(p.live)
	if !p.down {
		for _, n := range slices.Sorted(maps.Keys(l.cfg.NodeTypes)) {
			p.replaceExpiring(n, cands)
			if l.cfg.RayScales {
				p.replaceFailed(n, cands)
			} else {
				p.scale(n, cands)
			}
		}
		p.forgetReplaced()
	}
	p.startDrains() // the drains begun in this pass, at once (drain.go)
	l.forgetReplacements(p.live)
	l.forgetDrains(p.live)
	p.destroyLeaks(rentals)
	p.syncFirewall()
	return p.res, errors.Join(p.errs...)
}

// pass is one Tick's working state.
type pass struct {
	l     *Loop
	ctx   context.Context
	res   Result
	errs  []error
	down  bool
	now   time.Time
	types map[string]*tally
	live  map[string]wire.Candidate
	// rentals are this sweep's rentals by candidate (empty between sweeps)
	rentals map[string]provider.Rental
	halted  bool // the provider rents nothing now
	// failedSeen: failed candidates listed in this pass (RayScales).
	failedSeen map[string]bool
	// drain.go: drains begun in this pass (asked at its end), and which
	// drains asked before Ray shows done (read at its start).
	newDrains []newDrain
	drained   map[string]bool
}

// listRentals lists the provider's rentals when a sweep is due (every
// SweepEvery, and on every pass when down); nil otherwise. swept: the
// list was read.
func (p *pass) listRentals() (rentals []provider.Rental, swept bool) {
	l := p.l
	now := l.cfg.Now()
	// Half a tick of slack: ticks jitter, and a sweep due every tick
	// (SweepEvery = Every) must not skip one that came a little early.
	if l.cfg.Rentals == nil || !(p.down || l.lastSweep.IsZero() || now.Sub(l.lastSweep) >= l.cfg.SweepEvery-l.cfg.Every/2) {
		return nil, false
	}
	l.lastSweep = now
	rentals, err := l.cfg.Rentals.List(p.ctx)
	if err != nil {
		p.errs = append(p.errs, err)
		return nil, false
	}
	return rentals, true
}

// end ends a candidate, noting it in the result (or the error).
func (p *pass) end(c wire.Candidate, reason string) {
	if err := p.l.cfg.Cluster.End(p.ctx, c.CandidateID, reason); err != nil {
		p.errs = append(p.errs, err)
		return
	}
	p.res.Ended[c.CandidateID] = reason
	p.l.cfg.Log.Info("reconcile: ended candidate", "candidate", c.CandidateID, "node_type", c.NodeType, "state", c.State, "reason", reason)
}

// tally counts each node type's candidates, ending the lost, those that
// did not enroll in time and, when down, every live one; the rest are live.
func (p *pass) tally(cands []wire.Candidate) {
	p.types, p.live = map[string]*tally{}, map[string]wire.Candidate{}
	for n := range p.l.cfg.NodeTypes {
		p.types[n] = &tally{}
	}
	for _, c := range cands {
		t := p.types[c.NodeType]
		if t == nil {
			t = &tally{} // a node type no longer configured: ended below if down
		}
		p.tallyOne(c, t)
	}
}

func (p *pass) tallyOne(c wire.Candidate, t *tally) {
	cfg := p.l.cfg
	if !p.down && p.gone(c, t) {
		return
	}
	switch c.State {
	case wire.StateLost:
		p.end(c, ReasonLost)
		t.failed++
		t.failLong(ReasonLost)
		p.noteFailure(t, c, true)
	case wire.StatePending, wire.StateRented, wire.StateRunning:
		switch {
		case p.down:
			p.end(c, ReasonDown)
		case p.now.Sub(c.CreatedAt) > cfg.EnrollTimeout:
			p.end(c, ReasonEnrollTimeout)
			t.failed++
			t.failLong(ReasonEnrollTimeout)
			p.noteFailure(t, c, true)
		case p.l.replacement[c.CandidateID]:
			p.live[c.CandidateID] = c // extra to the count until it enrolls (contracts.go)
		default:
			t.inflight = append(t.inflight, c)
			p.live[c.CandidateID] = c
		}
	case wire.StateEnrolled:
		if p.down {
			if !p.endPlanned(c, ReasonDown) {
				p.live[c.CandidateID] = c // draining: rental kept, firewall open
			}
		} else {
			t.enrolled++
			p.live[c.CandidateID] = c
		}
	case wire.StateEnded:
		if !notFailures[c.Reason] && p.now.Sub(c.UpdatedAt) < cfg.FailureWindow {
			t.failed++
			p.noteFailure(t, c, false)
		}
		if !notFailures[c.Reason] && p.now.Sub(c.UpdatedAt) < cfg.PauseWindow {
			t.failLong(c.Reason) // ray_version included: a wrong image fails every rental alike
		}
	}
}

// gone ends a candidate whose rental the sweep found unable to serve: on
// a machine another rental keeps, or vanished after it ran (the host
// blocklisted network, unless a container that never enrolled exited).
func (p *pass) gone(c wire.Candidate, t *tally) bool {
	r, ok := p.rentals[c.CandidateID]
	if !ok || c.InstanceID == "" || r.InstanceID != c.InstanceID {
		return false
	}
	ran := c.State == wire.StateRunning || c.State == wire.StateEnrolled || c.State == wire.StateLost
	live := c.State != wire.StateEnded && c.State != wire.StateDestroyRequested
	switch {
	case r.Yield && live:
		p.end(c, ReasonMachineShared)
	case r.EndNow != "" && live:
		// Not the host's fault (outbid, contract end, price rise): no
		// blocklist; an outbid counts as a failure all the same.
		p.end(c, r.EndNow)
		if !notFailures[r.EndNow] {
			t.failed++
			t.failLong(r.EndNow)
		}
	case r.Vanished == "" || !ran:
		return false
	case c.State == wire.StateRunning && r.Vanished == "exited":
		p.end(c, ReasonInstanceExited)
		t.failed++
		t.failLong(ReasonInstanceExited)
	default:
		reason := ReasonHostVanished + " (" + r.Vanished + ")"
		p.end(c, reason)
		t.failed++
		t.failLong(ReasonHostVanished)
		if p.l.cfg.Blocklist != nil && c.HostID != "" {
			e := p.l.cfg.Blocklist.Add(c.HostID, wire.BlockNetwork, ReasonHostVanished)
			p.l.cfg.Log.Warn("reconcile: the host lost a rental after it ran; host blocklisted", "candidate", c.CandidateID,
				"instance", c.InstanceID, "host", c.HostID, "status", r.Vanished, "class", e.Class, "until", e.Until)
		}
	}
	return true
}

// forgetSpares drops spares that enrolled or are gone: no longer a spare
// to cancel.
func (l *Loop) forgetSpares(live map[string]wire.Candidate) {
	for id := range l.spares {
		if c, ok := live[id]; !ok || c.State == wire.StateEnrolled {
			delete(l.spares, id)
		}
	}
}

// scale brings node type n toward its wanted size: unneeded spares ended,
// candidates created up to the deficit (plus spares while candidates fail,
// unless paused or at budget), in-flight ones above max ended.
func (p *pass) scale(n string, cands []wire.Candidate) {
	l := p.l
	nt, t := l.cfg.NodeTypes[n], p.types[n]
	spare := 0
	if t.failed > 0 && t.enrolled < nt.MinWorkers {
		spare = l.cfg.Spares
	}
	deficit := max(nt.MinWorkers-t.enrolled, 0)
	want := deficit + spare // in flight
	if want > 0 {
		want = min(want, nt.MaxWorkers-t.enrolled+spare)
	}
	p.endUnneededSpares(t, want)
	if l.pause(n, t.failedLong, t.reasons) {
		want = 0 // in-flight candidates are kept: one may be the one that works
	}
	if l.atBudget(cands) || p.halted {
		want = 0
	}
	p.create(n, t, want, deficit, spare)
	// Above max (min lowered, or an external creator): end the newest
	// in-flight candidates, never an enrolled node.
	for excess := t.enrolled + len(t.inflight) - (nt.MaxWorkers + spare); excess > 0 && len(t.inflight) > 0; excess-- {
		c := t.inflight[len(t.inflight)-1]
		t.inflight = t.inflight[:len(t.inflight)-1]
		delete(p.live, c.CandidateID)
		p.end(c, ReasonScaleDown)
	}
}

// endUnneededSpares ends spares this loop rented that are no longer needed
// (the deficit is met) before they enroll, newest first.
func (p *pass) endUnneededSpares(t *tally, want int) {
	for i := len(t.inflight) - 1; i >= 0 && len(t.inflight) > want; i-- {
		if c := t.inflight[i]; p.l.spares[c.CandidateID] {
			t.inflight = append(t.inflight[:i], t.inflight[i+1:]...)
			delete(p.live, c.CandidateID)
			p.end(c, ReasonSpareUnneeded)
		}
	}
}

// create makes candidates of type n until want are in flight; those past
// the deficit are spares.
func (p *pass) create(n string, t *tally, want, deficit, spare int) {
	l := p.l
	nt := l.cfg.NodeTypes[n]
	for i := len(t.inflight); i < want; i++ {
		c, err := l.cfg.Cluster.Create(p.ctx, n)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("create %s candidate: %w", n, err))
			return
		}
		p.res.Created[n]++
		p.live[c.CandidateID] = c
		if i >= deficit {
			l.spares[c.CandidateID] = true
		}
		l.cfg.Log.Info("reconcile: created candidate", "candidate", c.CandidateID, "node_type", n,
			"enrolled", t.enrolled, "in_flight", len(t.inflight), "min", nt.MinWorkers, "max", nt.MaxWorkers, "spare", spare)
	}
}

// destroyLeaks destroys a rental whose candidate is not live, or a second
// rental of a live candidate whose instance is recorded (a create the
// provider ran twice). A rental of a candidate not yet patched with its
// instance ID (Rent just returned) is kept. Down: every rental but those
// of nodes still draining (drain.go).
func (p *pass) destroyLeaks(rentals []provider.Rental) {
	for _, r := range rentals {
		c, ok := p.live[r.CandidateID]
		if ok && (!p.down || p.l.draining(c.CandidateID)) && (c.InstanceID == "" || c.InstanceID == r.InstanceID) {
			continue // down: a node Ray is draining keeps its rental until it ends
		}
		if err := p.l.cfg.Rentals.Destroy(p.ctx, r.InstanceID); err != nil {
			p.errs = append(p.errs, err)
			continue
		}
		p.res.Destroyed = append(p.res.Destroyed, r.InstanceID)
		p.l.cfg.Log.Info("reconcile: destroyed a rental with no live candidate", "instance", r.InstanceID, "candidate", r.CandidateID, "down", p.down)
	}
}

// syncFirewall opens ports A and B to the live candidates that have a
// public IP and are running or enrolled, and to nobody else.
func (p *pass) syncFirewall() {
	if p.l.cfg.Firewall == nil {
		return
	}
	live := make([]wire.Candidate, 0, len(p.live))
	for _, c := range p.live {
		live = append(live, c)
	}
	ips := firewall.AllowedIPs(live)
	if err := p.l.cfg.Firewall.Sync(ips); err != nil {
		p.errs = append(p.errs, fmt.Errorf("firewall: %w", err))
	}
	p.res.Allowed = ips
}
