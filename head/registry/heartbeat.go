package registry

import (
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// Heartbeat records a heartbeat of a live node and says what the node should
// do: "stop" once the head has given up on it (lost, or its candidate is
// being destroyed). A node that is unknown or ended gets ErrNotFound. It
// writes nothing to disk: heartbeats are memory only.
func (r *Registry) Heartbeat(hb wire.Heartbeat) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[hb.InstanceID]
	if n == nil || n.State == wire.StateEnded {
		return "", ErrNotFound
	}
	now := r.cfg.Now().UTC()
	n.LastHeartbeat, n.Seq, n.Ray = &now, hb.Seq, hb.Ray
	r.lastSeen[n.InstanceID] = now
	if c := r.candidates[n.CandidateID]; n.State == wire.StateLost || c == nil || !wire.Live(c.State) {
		return wire.ActionStop, nil
	}
	return wire.ActionNone, nil
}

// NoteRayReport keeps a live node's last report of its Ray, its detail cut
// to wire.RayReportDetailMax bytes, for `head node` and the admin API.
// Memory only, like heartbeats: after a restart the next report tells.
func (r *Registry) NoteRayReport(instanceID, event, detail string) {
	if len(detail) > wire.RayReportDetailMax {
		detail = strings.ToValidUTF8(detail[:wire.RayReportDetailMax], "")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.nodes[instanceID]; n != nil && n.State != wire.StateEnded {
		n.RayReport = &wire.RayReport{Event: event, Detail: detail, At: r.cfg.Now().UTC()}
	}
}

// Live reports whether a node may use port B: known, not ended, and its
// candidate not ended.
func (r *Registry) Live(instanceID string) (wire.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[instanceID]
	if n == nil || n.State == wire.StateEnded {
		return wire.Node{}, false
	}
	if c := r.candidates[n.CandidateID]; c == nil || c.State == wire.StateEnded {
		return wire.Node{}, false
	}
	return copyNode(n), true
}

// Grace restarts every node's count of silent intervals now: the head could
// not hear heartbeats for a while (it was stopped, stalled, or its clock
// jumped), so silence until now proves nothing about the nodes.
func (r *Registry) Grace() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	for id := range r.lastSeen {
		r.lastSeen[id] = now
	}
}

// SweepLost marks lost every enrolled node whose last heartbeat (or the
// last Grace, whichever is later) is 3 intervals old, and returns them so
// the caller can have them destroyed. A node whose candidate has a write in
// flight waits for the next sweep.
func (r *Registry) SweepLost(interval time.Duration) ([]wire.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	var nodes []*wire.Node
	var cands []*candidate
	for id, n := range r.nodes {
		if n.State != wire.StateEnrolled || now.Sub(r.lastSeen[id]) < 3*interval {
			continue
		}
		if _, busy := r.writing[n.CandidateID]; busy {
			continue
		}
		r.writing[n.CandidateID] = make(chan struct{})
		cp := copyNode(n)
		cp.State = wire.StateLost
		nodes = append(nodes, &cp)
		if c := r.candidates[n.CandidateID]; c != nil && c.State == wire.StateEnrolled {
			next := *c
			next.State, next.Reason, next.UpdatedAt = wire.StateLost, "no heartbeat for 3 intervals", now.UTC()
			cands = append(cands, &next)
		}
	}
	if len(nodes) == 0 {
		return nil, nil
	}
	defer func() {
		for _, n := range nodes {
			r.end(n.CandidateID)
		}
	}()
	err := r.commit("lost", func(w writer) error {
		for _, n := range nodes {
			if err := w.putNode(n); err != nil {
				return err
			}
		}
		for _, c := range cands {
			if err := w.putCandidate(c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	lost := make([]wire.Node, 0, len(nodes))
	for _, n := range nodes {
		r.setNode(n)
		lost = append(lost, copyNode(n))
	}
	for _, c := range cands {
		r.setCandidate(c)
	}
	return lost, nil
}

// ExpireInterrupted returns the candidates whose interrupted enrollment was
// not retried within RetryWindow of its token's consumption: nobody can
// finish them now, so the caller destroys them.
func (r *Registry) ExpireInterrupted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	var out []string
	for id := range r.resumable {
		if c := r.candidates[id]; c == nil || now.Sub(c.ConsumedAt) >= RetryWindow {
			delete(r.resumable, id)
			out = append(out, id)
		}
	}
	return out
}

// SetHealth records one health poll: a failure counts up, a success resets.
// At threshold consecutive failures the node is unhealthy.
func (r *Registry) SetHealth(instanceID string, ok bool, threshold int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[instanceID]
	if n == nil {
		return
	}
	if ok {
		n.Health, n.HealthFailures = wire.HealthHealthy, 0
		return
	}
	n.HealthFailures++
	if n.HealthFailures >= threshold {
		n.Health = wire.HealthUnhealthy
	}
}
