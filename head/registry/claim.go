package registry

import (
	"fmt"
	"net/netip"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// Claim is a consumed join token: the right to finish (or fail) one
// enrollment. It holds no secret.
type Claim struct {
	Candidate wire.Candidate
}

// Claim runs decision steps 2 and 3 of SPEC §6 under one lock: the candidate
// must be known, live and running, the request must come from its public IP
// and carry its token, and it must not be enrolled or enrolling. On success
// the token is consumed (its hash is dropped, on disk too) before Claim
// returns, so of concurrent requests with one token exactly one gets a Claim.
// Refusals return a *RefusalError and change nothing.
func (r *Registry) Claim(instanceID, sourceIP string, tok secret.String) (*Claim, error) {
	hash := HashToken(tok)
	src := sourceIP
	if a, err := netip.ParseAddr(sourceIP); err == nil {
		src = a.Unmap().String()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.liveByInstance(instanceID)
	if c == nil {
		for _, o := range r.candidates {
			if o.InstanceID == instanceID {
				return nil, &RefusalError{Reason: RefuseEnded}
			}
		}
		return nil, &RefusalError{Reason: RefuseUnknown}
	}
	if c.PublicIP == "" {
		return nil, &RefusalError{Reason: RefuseUnknown}
	}
	if src != c.PublicIP {
		return nil, &RefusalError{Reason: RefuseSourceIP}
	}
	if c.Consumed {
		if _, busy := r.inFlight[c.CandidateID]; busy {
			return nil, &RefusalError{Reason: RefuseInFlight}
		}
		return nil, &RefusalError{Reason: RefuseEnrolled}
	}
	if !constantTimeHashEqual(hash, c.TokenHash) {
		return nil, &RefusalError{Reason: RefuseToken}
	}
	c.Consumed, c.TokenHash, c.UpdatedAt = true, "", r.cfg.Now().UTC()
	r.inFlight[c.CandidateID] = c.NodeType
	if err := r.saveLocked(); err != nil {
		// The token stays burned in memory: better a lost candidate than a
		// token that works twice.
		return nil, fmt.Errorf("consume token: %w", err)
	}
	return &Claim{Candidate: c.Candidate}, nil
}

// TakeSlot reserves one of max slots of the claim's node type (decision step
// 8). Enrolled and lost nodes and other reservations count.
func (r *Registry) TakeSlot(cl *Claim, max int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	used := 0
	for _, n := range r.nodes {
		if n.NodeType == cl.Candidate.NodeType && n.State != wire.StateEnded {
			used++
		}
	}
	for id := range r.slotHeld {
		if r.inFlight[id] == cl.Candidate.NodeType {
			used++
		}
	}
	if used >= max {
		return false
	}
	r.slotHeld[cl.Candidate.CandidateID] = true
	return true
}

// Enrolled is what Complete records of a new node.
type Enrolled struct {
	Serial       string
	GuestAPIPort int
}

// Complete turns a claimed candidate into a node with the serial of its
// certificate. It fails if the candidate was ended meanwhile.
func (r *Registry) Complete(cl *Claim, e Enrolled) (wire.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := cl.Candidate.CandidateID
	defer r.releaseLocked(id)
	c := r.candidates[id]
	if c == nil || !isLive(c.State) {
		return wire.Node{}, fmt.Errorf("complete enrollment: %w: candidate ended meanwhile", ErrConflict)
	}
	now := r.cfg.Now().UTC()
	c.State, c.UpdatedAt = wire.StateEnrolled, now
	n := &wire.Node{
		InstanceID: c.InstanceID, CandidateID: id, NodeType: c.NodeType,
		PublicIP: c.PublicIP, HostID: c.HostID, State: wire.StateEnrolled,
		Serial: e.Serial, EnrolledAt: now, Health: wire.HealthUnknown, GuestAPIPort: e.GuestAPIPort,
	}
	r.nodes[n.InstanceID] = n
	r.lastSeen[n.InstanceID] = now
	r.serials = append(r.serials, IssuedSerial{InstanceID: n.InstanceID, Serial: e.Serial, IssuedAt: now})
	return copyNode(n), r.saveLocked()
}

// Release ends a claim that did not complete (the candidate is being
// destroyed), freeing its slot reservation.
func (r *Registry) Release(cl *Claim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releaseLocked(cl.Candidate.CandidateID)
}

func (r *Registry) releaseLocked(id string) {
	delete(r.inFlight, id)
	delete(r.slotHeld, id)
}
