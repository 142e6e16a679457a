package enroll

import (
	"log/slog"
	"sync"

	"github.com/rayvast/rayvast/internal/wire"
)

// ipHolds are the public IPs of enrollments past step 7a that are not yet
// recorded as nodes: two candidates behind one IP enrolling at once must
// not both pass the registry lookup before either is a node.
type ipHolds struct {
	mu   sync.Mutex
	held map[string]string // public IP → candidate id
}

// sharedIP is step 7a: another live node (or an enrollment about to become
// one) already has this public IP → shared_ip, destroy, no blocklist.
// On a pass the IP is held for the candidate until release is called,
// which the caller does once the node is recorded or rejected.
func (s *Server) sharedIP(c wire.Candidate, log *slog.Logger) (reason string, release func()) {
	h := &s.ips
	h.mu.Lock()
	defer h.mu.Unlock()
	if n, ok := s.cfg.Registry.LiveNodeOnIP(c.PublicIP, c.InstanceID); ok {
		log.Warn("public ip already has a live node (Ray keys state by node IP)", "public_ip", c.PublicIP, "node", n.InstanceID)
		return wire.ReasonSharedIP, nil
	}
	if other, ok := h.held[c.PublicIP]; ok {
		log.Warn("public ip held by another enrollment in flight", "public_ip", c.PublicIP, "other_candidate", other)
		return wire.ReasonSharedIP, nil
	}
	if h.held == nil {
		h.held = map[string]string{}
	}
	h.held[c.PublicIP] = c.CandidateID
	return "", func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.held, c.PublicIP)
	}
}
