package registry

import (
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// Heartbeat records a heartbeat of a live node and says what the node should
// do: "stop" once the head has given up on it (lost, or its candidate is
// being destroyed). A node that is unknown or ended gets ErrNotFound.
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
	if c := r.candidates[n.CandidateID]; n.State == wire.StateLost || c == nil || !isLive(c.State) {
		return wire.ActionStop, nil
	}
	return wire.ActionNone, nil
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

// SweepLost marks lost every enrolled node whose last heartbeat (or the
// head's start, whichever is later) is 3 intervals old, and returns them so
// the caller can have them destroyed.
func (r *Registry) SweepLost(interval time.Duration) ([]wire.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Now()
	var lost []wire.Node
	for id, n := range r.nodes {
		if n.State != wire.StateEnrolled || now.Sub(r.lastSeen[id]) < 3*interval {
			continue
		}
		n.State = wire.StateLost
		if c := r.candidates[n.CandidateID]; c != nil && c.State == wire.StateEnrolled {
			c.State, c.Reason, c.UpdatedAt = wire.StateLost, "no heartbeat for 3 intervals", now.UTC()
		}
		lost = append(lost, copyNode(n))
	}
	if len(lost) == 0 {
		return nil, nil
	}
	return lost, r.saveLocked()
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
