package registry

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// Claim is a consumed join token: the right to finish (or fail) one
// enrollment. It holds no secret.
type Claim struct {
	Candidate wire.Candidate
	// Reissue: the same agent retried an enrollment that completed (its
	// answer was lost). The caller issues a fresh key and certificate and
	// records it with Reissue; steps 4–8 were passed already.
	Reissue bool
}

// Claim runs decision steps 2 and 3 of docs/protocol.md §6: the candidate must be known,
// live and running, the request must come from its public IP and carry its
// token, and it must not be enrolled or enrolling. On success the token is
// consumed (on disk, with the hash of the port_key that consumed it) before
// Claim returns, so of concurrent requests with one token exactly one gets a
// Claim. A retry by the same agent within RetryWindow (same token, same
// port_key, same IP) of a consumed token gets a Claim again when no
// enrollment of it is running: Reissue when it completed, or to resume at
// step 4 when the head stopped before completing it. Refusals return a
// *RefusalError and change nothing.
func (r *Registry) Claim(instanceID, sourceIP string, tok secret.String, portKey secret.Bytes) (*Claim, error) {
	hash, keyHash := HashToken(tok), HashPortKey(portKey)
	src := sourceIP
	if a, err := netip.ParseAddr(sourceIP); err == nil {
		src = a.Unmap().String()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.byInstance[instanceID]
	if !ok {
		return nil, r.unknown(instanceID)
	}
	r.begin(id) // a concurrent claim of the same token waits here
	defer r.end(id)
	c := r.candidates[id]
	if c == nil || !wire.Live(c.State) || c.InstanceID != instanceID {
		return nil, r.unknown(instanceID)
	}
	if c.PublicIP == "" {
		return nil, &RefusalError{Reason: RefuseUnknown}
	}
	if src != c.PublicIP {
		return nil, &RefusalError{Reason: RefuseSourceIP}
	}
	if c.Consumed {
		return r.retry(c, hash, keyHash)
	}
	if !constantTimeHashEqual(hash, c.TokenHash) {
		return nil, &RefusalError{Reason: RefuseToken}
	}
	next := *c
	next.Consumed, next.TokenHash = true, ""
	next.ConsumedHash, next.PortKeyHash = hash, keyHash
	next.ConsumedAt = r.cfg.Now().UTC()
	next.UpdatedAt = next.ConsumedAt
	if err := r.commit("claim", func(w writer) error { return w.putCandidate(&next) }); err != nil {
		// Nothing changed, on disk or here: the same request may try again.
		return nil, fmt.Errorf("consume token: %w", err)
	}
	r.setCandidate(&next)
	r.inFlight[id] = next.NodeType
	return &Claim{Candidate: next.Candidate}, nil
}

// retry judges a request about a consumed token. Caller holds mu.
func (r *Registry) retry(c *candidate, hash, keyHash string) (*Claim, error) {
	id := c.CandidateID
	if _, busy := r.inFlight[id]; busy {
		return nil, &RefusalError{Reason: RefuseInFlight}
	}
	same := constantTimeHashEqual(hash, c.ConsumedHash) && constantTimeHashEqual(keyHash, c.PortKeyHash)
	if !same || r.cfg.Now().Sub(c.ConsumedAt) >= RetryWindow {
		return nil, &RefusalError{Reason: RefuseEnrolled}
	}
	switch {
	case c.State == wire.StateEnrolled:
		r.inFlight[id] = c.NodeType
		return &Claim{Candidate: c.Candidate, Reissue: true}, nil
	case r.resumable[id]:
		delete(r.resumable, id)
		r.inFlight[id] = c.NodeType
		return &Claim{Candidate: c.Candidate}, nil
	}
	return nil, &RefusalError{Reason: RefuseEnrolled}
}

// unknown tells an ended instance from one never seen, for the log only.
// Caller holds mu. It scans: refusals are rate-limited per source IP.
func (r *Registry) unknown(instanceID string) error {
	for _, o := range r.candidates {
		if o.InstanceID == instanceID {
			return &RefusalError{Reason: RefuseEnded}
		}
	}
	return &RefusalError{Reason: RefuseUnknown}
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
	r.hook("slot") // steps 4–7 passed; step 9 next
	return true
}

// Enrolled is what Complete records of a new node.
type Enrolled struct {
	Serial       string
	GuestAPIPort int
	MeshPort     int   // the mesh's port of the 64 (0: none)
	Ports        []int // the node's 64, sorted
	// UnheardLimitS is the bundle's heartbeat.unheard_limit_s.
	UnheardLimitS int
}

// Complete turns a claimed candidate into a node with the serial of its
// certificate. It fails if the candidate was ended meanwhile. If the write
// fails, nothing changes and the agent's retry resumes at step 4.
func (r *Registry) Complete(cl *Claim, e Enrolled) (wire.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := cl.Candidate.CandidateID
	r.begin(id)
	defer r.end(id)
	defer r.releaseLocked(id)
	c := r.candidates[id]
	if c == nil || !wire.Live(c.State) {
		return wire.Node{}, fmt.Errorf("complete enrollment: %w: candidate ended meanwhile", ErrConflict)
	}
	now := r.cfg.Now().UTC()
	next := *c
	next.State, next.UpdatedAt = wire.StateEnrolled, now
	n := &wire.Node{
		InstanceID: c.InstanceID, CandidateID: id, NodeType: c.NodeType,
		PublicIP: c.PublicIP, HostID: c.HostID, State: wire.StateEnrolled,
		Serial: e.Serial, EnrolledAt: now, Health: wire.HealthUnknown, GuestAPIPort: e.GuestAPIPort,
		MeshPort: e.MeshPort, Ports: slices.Clone(e.Ports),
		UnheardLimitS: e.UnheardLimitS,
	}
	sr := IssuedSerial{InstanceID: n.InstanceID, Serial: e.Serial, IssuedAt: now}
	err := r.commit("complete", func(w writer) error {
		if err := w.putNode(n); err != nil {
			return err
		}
		if err := w.putSerial(sr); err != nil {
			return err
		}
		return w.putCandidate(&next)
	})
	if err != nil {
		r.resumable[id] = true
		return wire.Node{}, fmt.Errorf("complete enrollment: %w", err)
	}
	r.setCandidate(&next)
	r.nodes[n.InstanceID] = n
	r.lastSeen[n.InstanceID] = now
	r.serials = append(r.serials, sr)
	return copyNode(n), nil
}

// Reissue records the fresh certificate of a retried, completed enrollment:
// its serial replaces the node's old one, so the old certificate no longer
// opens port B.
func (r *Registry) Reissue(cl *Claim, serial string) (wire.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := cl.Candidate.CandidateID
	r.begin(id)
	defer r.end(id)
	defer r.releaseLocked(id)
	c := r.candidates[id]
	n := r.nodes[cl.Candidate.InstanceID]
	if c == nil || c.State != wire.StateEnrolled || n == nil || n.CandidateID != id {
		return wire.Node{}, fmt.Errorf("reissue: %w: candidate is no longer enrolled", ErrConflict)
	}
	next := copyNode(n)
	next.Serial = serial
	sr := IssuedSerial{InstanceID: n.InstanceID, Serial: serial, IssuedAt: r.cfg.Now().UTC()}
	err := r.commit("reissue", func(w writer) error {
		if err := w.putNode(&next); err != nil {
			return err
		}
		return w.putSerial(sr)
	})
	if err != nil {
		return wire.Node{}, fmt.Errorf("reissue: %w", err)
	}
	r.setNode(&next)
	r.serials = append(r.serials, sr)
	return copyNode(&next), nil
}

// Report records, before a rejection, what the claim's agent reported, so
// `head node` can tell why a host was refused. A failed write is logged by
// the caller and changes nothing: the rejection goes on.
func (r *Registry) Report(cl *Claim, rep wire.CheckReport) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := cl.Candidate.CandidateID
	r.begin(id)
	defer r.end(id)
	c := r.candidates[id]
	if c == nil {
		return fmt.Errorf("report: %w: candidate gone", ErrConflict)
	}
	next := *c
	next.Reported = &rep
	if err := r.commit("report", func(w writer) error { return w.putCandidate(&next) }); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	r.setCandidate(&next)
	return nil
}

// Postpone gives up a claim that stopped before its checks for the head's
// own reasons (no port check turn in time): the same agent's retry resumes
// at step 4, as after a restart.
func (r *Registry) Postpone(cl *Claim) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := cl.Candidate.CandidateID
	r.releaseLocked(id)
	if c := r.candidates[id]; c != nil && wire.Live(c.State) && c.State != wire.StateEnrolled {
		r.resumable[id] = true
	}
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
