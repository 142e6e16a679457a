package wire

import "time"

// Health of a node as the head's guest API polls see it.
const (
	HealthUnknown   = "unknown"
	HealthHealthy   = "healthy"
	HealthUnhealthy = "unhealthy"
)

// Node is one entry of GET /v1/nodes.
type Node struct {
	InstanceID     string     `json:"instance_id"`
	CandidateID    string     `json:"candidate_id"`
	NodeType       string     `json:"node_type"`
	PublicIP       string     `json:"public_ip"`
	HostID         string     `json:"host_id,omitempty"`
	State          string     `json:"state"`
	Serial         string     `json:"serial"` // hex
	EnrolledAt     time.Time  `json:"enrolled_at"`
	LastHeartbeat  *time.Time `json:"last_heartbeat,omitempty"`
	Seq            int64      `json:"seq"`
	Ray            RayStatus  `json:"ray"`
	Health         string     `json:"health"`
	HealthFailures int        `json:"health_failures"`
	GuestAPIPort   int        `json:"guest_api_port"`
	// MeshPort and Ports are the node's mesh port and its 64 (recorded
	// at enrollment; absent for nodes enrolled before the mesh).
	MeshPort int   `json:"mesh_port,omitempty"`
	Ports    []int `json:"ports,omitempty"`
	// RayReport is the last report the node's agent sent of its Ray
	// (ray_not_joined with Ray's last words, ray_exited, …), memory only
	// like heartbeats; absent until one comes. Detail came from the node.
	RayReport *RayReport `json:"ray_report,omitempty"`
	// UnheardLimitS is what its bundle told the node: unheard that long,
	// it ends its own rental (issue 31); 0: never.
	UnheardLimitS int `json:"unheard_limit_s,omitempty"`
}

// RayReport is one report of a node's Ray as the head received it.
type RayReport struct {
	Event  string    `json:"event"`
	Detail string    `json:"detail,omitempty"` // cut to RayReportDetailMax bytes
	At     time.Time `json:"at"`
}

// RayReportDetailMax bounds the detail kept in Node.RayReport.
const RayReportDetailMax = 512
