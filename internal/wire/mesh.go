package wire

// The mesh: the agents carry their Ray processes' collective traffic
// (torch.distributed's store, gloo, NCCL sockets) between nodes over mutual
// TLS 1.3 with the node certificates, on one port of each node's 64 (docs/protocol.md
// §9 "Collective traffic"; the protocol history in doc.go, the design in
// agent/mesh).

// MeshGrant is the bundle's mesh block: the port of the node's 64 its
// agent serves the mesh on.
type MeshGrant struct {
	Port int `json:"port"`
}

// MeshMembers is the cluster's live membership as the head sees it. The
// heartbeat reply carries it only when its Version differs from the one
// the heartbeat said it holds (mesh_version), so an unchanged cluster
// costs a heartbeat nothing.
type MeshMembers struct {
	Version string       `json:"version"`
	Peers   []MeshMember `json:"peers"`
}

// MeshMember is one enrolled node: the only ones whose certificates the
// mesh accepts, and the addresses it carries traffic to.
type MeshMember struct {
	InstanceID string `json:"instance_id"`
	PublicIP   string `json:"public_ip"`
	MeshPort   int    `json:"mesh_port"`
	// Ports are the node's 64 (vast forwards them): a connect to one of
	// them goes direct, as Ray's own traffic does; a connect to any other
	// port of the node's IP goes through the mesh.
	Ports []int `json:"ports"`
}
