package nodeapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// meshMaxAge bounds how stale the membership a heartbeat answer carries
// may be: it is rebuilt from the registry at most once per meshMaxAge, so
// heartbeats of a large cluster do not each copy every node.
const meshMaxAge = time.Second

// meshCache is the last membership built, and when.
type meshCache struct {
	at      time.Time
	members wire.MeshMembers
}

// meshMembers is the cluster's mesh membership: every enrolled node that
// serves a mesh (lost and ended nodes are out, so their certificates open
// no other node's mesh), sorted by instance ID, with a version that is a
// hash of the list.
func (s *Server) meshMembers() wire.MeshMembers {
	now := s.cfg.Now()
	s.mu.Lock()
	c := s.mesh
	s.mu.Unlock()
	if c != nil && now.Sub(c.at) >= 0 && now.Sub(c.at) < meshMaxAge {
		return c.members
	}
	m := wire.MeshMembers{Peers: []wire.MeshMember{}}
	for _, n := range s.cfg.Registry.Nodes() { // sorted by instance ID
		if n.State != wire.StateEnrolled || n.MeshPort == 0 {
			continue
		}
		m.Peers = append(m.Peers, wire.MeshMember{InstanceID: n.InstanceID, PublicIP: n.PublicIP, MeshPort: n.MeshPort, Ports: n.Ports})
	}
	b, _ := json.Marshal(m.Peers)
	sum := sha256.Sum256(b)
	m.Version = hex.EncodeToString(sum[:8])
	s.mu.Lock()
	s.mesh = &meshCache{at: now, members: m}
	s.mu.Unlock()
	return m
}
