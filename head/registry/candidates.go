package registry

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// NewCandidate records a candidate and returns it with its new join token
// (32 random bytes, base64url without padding). Only the token's hash is kept.
func (r *Registry) NewCandidate(req wire.CandidateRequest) (wire.Candidate, secret.String, error) {
	if req.InstanceID != "" && !wire.ValidInstanceID(req.InstanceID) {
		return wire.Candidate{}, secret.String{}, fmt.Errorf("%w: instance_id must be 1-64 of [A-Za-z0-9._-]", ErrInvalid)
	}
	if req.PublicIP != "" {
		if _, err := netip.ParseAddr(req.PublicIP); err != nil {
			return wire.Candidate{}, secret.String{}, fmt.Errorf("%w: public_ip is not an IP literal", ErrInvalid)
		}
	}
	raw := make([]byte, 32)
	if _, err := io.ReadFull(r.cfg.Rand, raw); err != nil {
		return wire.Candidate{}, secret.String{}, fmt.Errorf("new join token: %w", err)
	}
	tok := secret.New(base64.RawURLEncoding.EncodeToString(raw))
	idb := make([]byte, 8)
	if _, err := io.ReadFull(r.cfg.Rand, idb); err != nil {
		return wire.Candidate{}, secret.String{}, fmt.Errorf("new candidate id: %w", err)
	}
	now := r.cfg.Now().UTC()
	c := &candidate{
		Candidate: wire.Candidate{
			CandidateID: "c-" + hex.EncodeToString(idb), NodeType: req.NodeType,
			InstanceID: req.InstanceID, PublicIP: canonIP(req.PublicIP), HostID: req.HostID,
			CreatedAt: now, UpdatedAt: now,
		},
		TokenHash: HashToken(tok),
	}
	c.State = rentalState(c)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.InstanceID != "" {
		if _, taken := r.byInstance[c.InstanceID]; taken {
			return wire.Candidate{}, secret.String{}, fmt.Errorf("%w: instance_id already belongs to a live candidate", ErrConflict)
		}
		r.byInstance[c.InstanceID] = c.CandidateID // held while the write runs
	}
	r.begin(c.CandidateID)
	defer r.end(c.CandidateID)
	if err := r.commit("new", func(w writer) error { return w.putCandidate(c) }); err != nil {
		if c.InstanceID != "" {
			delete(r.byInstance, c.InstanceID)
		}
		return wire.Candidate{}, secret.String{}, err
	}
	r.setCandidate(c)
	return c.Candidate, tok, nil
}

func canonIP(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().String()
	}
	return s
}

// rentalState is the state a not yet enrolled candidate has from what is known.
func rentalState(c *candidate) string {
	switch {
	case c.InstanceID != "" && c.PublicIP != "":
		return wire.StateRunning
	case c.InstanceID != "":
		return wire.StateRented
	default:
		return wire.StatePending
	}
}

// liveByInstance finds the live candidate holding instance id. Caller holds mu.
func (r *Registry) liveByInstance(id string) *candidate {
	return r.candidates[r.byInstance[id]]
}

// Patch sets fields of a candidate that are not yet set (docs/protocol.md §8 PATCH).
func (r *Registry) Patch(id string, p wire.CandidatePatch) (wire.Candidate, error) {
	if p.InstanceID != "" && !wire.ValidInstanceID(p.InstanceID) {
		return wire.Candidate{}, fmt.Errorf("%w: instance_id must be 1-64 of [A-Za-z0-9._-]", ErrInvalid)
	}
	if p.PublicIP != "" {
		if _, err := netip.ParseAddr(p.PublicIP); err != nil {
			return wire.Candidate{}, fmt.Errorf("%w: public_ip is not an IP literal", ErrInvalid)
		}
	}
	if !(p.DPHTotal >= 0 && p.DPHTotal < 1000) { // NaN fails both
		return wire.Candidate{}, fmt.Errorf("%w: dph_total must be 0-1000 $/h", ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begin(id)
	defer r.end(id)
	c := r.candidates[id]
	if c == nil {
		return wire.Candidate{}, ErrNotFound
	}
	if !wire.Live(c.State) {
		return wire.Candidate{}, fmt.Errorf("%w: candidate is %s", ErrConflict, c.State)
	}
	set := func(field, cur, v string) error {
		if v != "" && cur != "" && cur != v {
			return fmt.Errorf("%w: %s is already set", ErrConflict, field)
		}
		return nil
	}
	if err := errors.Join(set("instance_id", c.InstanceID, p.InstanceID), set("public_ip", c.PublicIP, canonIP(p.PublicIP)), set("host_id", c.HostID, p.HostID)); err != nil {
		return wire.Candidate{}, err
	}
	reserved := false
	if p.InstanceID != "" && c.InstanceID == "" {
		if _, taken := r.byInstance[p.InstanceID]; taken {
			return wire.Candidate{}, fmt.Errorf("%w: instance_id already belongs to a live candidate", ErrConflict)
		}
		r.byInstance[p.InstanceID], reserved = id, true
	}
	n := *c
	if p.InstanceID != "" {
		n.InstanceID = p.InstanceID
	}
	if p.PublicIP != "" {
		n.PublicIP = canonIP(p.PublicIP)
	}
	if p.HostID != "" {
		n.HostID = p.HostID
	}
	if p.DPHTotal > 0 {
		n.DPHTotal = p.DPHTotal
	}
	if n.InstanceID != "" && n.RentedAt == nil {
		t := r.cfg.Now().UTC()
		n.RentedAt = &t // billing starts: the cost of the candidate counts from here
	}
	if n.State == wire.StatePending || n.State == wire.StateRented || n.State == wire.StateRunning {
		n.State = rentalState(&n)
	}
	n.UpdatedAt = r.cfg.Now().UTC()
	if err := r.commit("patch", func(w writer) error { return w.putCandidate(&n) }); err != nil {
		if reserved {
			delete(r.byInstance, p.InstanceID)
		}
		return wire.Candidate{}, err
	}
	r.setCandidate(&n)
	return n.Candidate, nil
}

// End kills a candidate's token and ends its node, if any: heartbeats are
// refused from then on. Ending an ended candidate is not an error.
func (r *Registry) End(id, reason string) (wire.Candidate, error) {
	return r.finish(id, wire.StateEnded, reason)
}

// RequestDestroy kills the token and shows the candidate as
// destroy_requested, for an external provider to end.
func (r *Registry) RequestDestroy(id, reason string) (wire.Candidate, error) {
	return r.finish(id, wire.StateDestroyRequested, reason)
}

func (r *Registry) finish(id, state, reason string) (wire.Candidate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begin(id)
	defer r.end(id)
	c := r.candidates[id]
	if c == nil {
		return wire.Candidate{}, ErrNotFound
	}
	if c.State == wire.StateEnded || c.State == state {
		return c.Candidate, nil
	}
	next := *c
	next.State, next.TokenHash, next.UpdatedAt = state, "", r.cfg.Now().UTC()
	next.ConsumedHash, next.PortKeyHash = "", "" // the token dies for retries too
	if reason != "" {
		next.Reason = reason
	}
	var node *wire.Node
	if n := r.nodes[c.InstanceID]; n != nil && n.CandidateID == c.CandidateID && state == wire.StateEnded {
		cp := copyNode(n)
		cp.State = wire.StateEnded
		node = &cp
	}
	err := r.commit(finishOp(state), func(w writer) error {
		if node != nil {
			if err := w.putNode(node); err != nil {
				return err
			}
		}
		return w.putCandidate(&next)
	})
	if err != nil {
		return wire.Candidate{}, err
	}
	r.setCandidate(&next)
	if node != nil {
		r.setNode(node)
	}
	return next.Candidate, nil
}

func finishOp(state string) string {
	if state == wire.StateEnded {
		return "end"
	}
	return "destroy"
}
