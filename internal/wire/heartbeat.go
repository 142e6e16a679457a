package wire

import "time"

// Ray process states in heartbeats: starting from Ray's (re)start until
// the node has joined the Ray cluster (`ray start` said its runtime
// started, which it does once the GCS lists the node), then running.
const (
	RayStarting = "starting"
	RayRunning  = "running"
	RayExited   = "exited"
)

// Heartbeat actions.
const (
	ActionNone = "none"
	ActionStop = "stop"
)

// Heartbeat is the body of POST /heartbeat on port B (docs/protocol.md §7).
type Heartbeat struct {
	Version     int       `json:"version"`
	InstanceID  string    `json:"instance_id"`
	Seq         int64     `json:"seq"`
	Ray         RayStatus `json:"ray"`
	HealthToken string    `json:"health_token"` // bearer token for guest:health
	// MeshVersion is the version of the mesh membership the node holds
	// ("" none yet): the reply carries the membership only when it changed.
	MeshVersion string `json:"mesh_version,omitempty"`
}

// RayStatus is what the supervisor knows of Ray.
type RayStatus struct {
	State    string `json:"state"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts"`
	ExitCode *int   `json:"exit_code"`
}

// HeartbeatReply answers a heartbeat.
type HeartbeatReply struct {
	IntervalS int    `json:"interval_s"`
	Action    string `json:"action"`
	// RayHead is the Ray head the head runs, while it runs (absent when the
	// head runs none, or while it is starting): a node whose Ray joined a
	// Ray head no longer named, or named with another ID, restarts its Ray
	// at once (version 2, later; see the protocol history). A Ray head
	// whose GCS has a store is named with the store's ID while it starts
	// and restarts too (revision 27): the same cluster throughout.
	RayHead *RayHeadRun `json:"ray_head,omitempty"`
	// Mesh is the cluster's membership when it differs from the version
	// the heartbeat named; absent when unchanged.
	Mesh *MeshMembers `json:"mesh,omitempty"`
	// Drain, while the head drains this node before a planned end
	// (revision 29), says so: the head asked Ray to drain the node and
	// ends its rental by the deadline. Ray on the node that exits from
	// then on is not started again. Absent otherwise.
	Drain *DrainNotice `json:"drain,omitempty"`
}

// DrainNotice is the head's word that it is ending the node after a
// drain in Ray (docs/protocol.md §7).
type DrainNotice struct {
	Deadline time.Time `json:"deadline"` // the rental ends by then
}

// RayHeadRun names one run of the cluster's Ray head.
type RayHeadRun struct {
	ID string `json:"id"` // new at each start of the Ray head
}

// Report is the body of POST /report (answered 204).
type Report struct {
	Version    int    `json:"version"`
	InstanceID string `json:"instance_id"`
	Event      string `json:"event"`
	Detail     string `json:"detail"`
}

// Report events the agent sends.
const (
	EventRayExited    = "ray_exited"
	EventRayRestarted = "ray_restarted"
	EventRayCrashloop = "ray_crashloop" // the head ends the node at once
	EventStopping     = "stopping"
	EventRayNotJoined = "ray_not_joined" // Ray did not join within the agent's bound; detail: Ray's last words
)
