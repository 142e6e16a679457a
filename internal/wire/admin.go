package wire

import "time"

// Candidate and node states (SPEC §8).
const (
	StatePending          = "pending"           // created, no instance yet
	StateRented           = "rented"            // instance id known, no public IP yet
	StateRunning          = "running"           // public IP known: may enroll
	StateEnrolled         = "enrolled"          // a node
	StateLost             = "lost"              // no heartbeat for 3 intervals
	StateEnded            = "ended"             // token dead, heartbeats refused
	StateDestroyRequested = "destroy_requested" // an external provider must end it
)

// Health of a node as the head's guest API polls see it.
const (
	HealthUnknown   = "unknown"
	HealthHealthy   = "healthy"
	HealthUnhealthy = "unhealthy"
)

// CandidateRequest is the body of POST /v1/candidates.
type CandidateRequest struct {
	NodeType   string `json:"node_type"`
	InstanceID string `json:"instance_id,omitempty"`
	PublicIP   string `json:"public_ip,omitempty"`
	HostID     string `json:"host_id,omitempty"`
}

// CandidatePatch is the body of PATCH /v1/candidates/{id}: fields not yet set.
type CandidatePatch struct {
	InstanceID string `json:"instance_id,omitempty"`
	PublicIP   string `json:"public_ip,omitempty"`
	HostID     string `json:"host_id,omitempty"`
	// DPHTotal is the rental's price in $/hour, as the provider charges it.
	DPHTotal float64 `json:"dph_total,omitempty"`
}

// CandidateCreated answers POST /v1/candidates with 201. Env holds the
// RAYVAST_* vars of SPEC §2 for the rental request, join token included.
type CandidateCreated struct {
	CandidateID string            `json:"candidate_id"`
	JoinToken   string            `json:"join_token"` // secret (one-use)
	Env         map[string]string `json:"env"`
}

// Candidate is one entry of GET /v1/candidates.
type Candidate struct {
	CandidateID string    `json:"candidate_id"`
	NodeType    string    `json:"node_type"`
	InstanceID  string    `json:"instance_id,omitempty"`
	PublicIP    string    `json:"public_ip,omitempty"`
	HostID      string    `json:"host_id,omitempty"`
	State       string    `json:"state"`
	Reason      string    `json:"reason,omitempty"` // why it was ended or must be destroyed
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// DPHTotal is what the rental costs in $/hour (0: free or unknown);
	// RentedAt is when its instance was recorded (billing starts).
	DPHTotal float64    `json:"dph_total,omitempty"`
	RentedAt *time.Time `json:"rented_at,omitempty"`
}

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
}

// Blocklist classes (seed 000: security 30 days, network 1 day).
const (
	BlockSecurity = "security"
	BlockNetwork  = "network"
)

// BlockEntry is one entry of GET /v1/blocklist.
type BlockEntry struct {
	HostID string    `json:"host_id"`
	Class  string    `json:"class"`
	Reason string    `json:"reason"`
	Until  time.Time `json:"until"`
}

// Config is the head's config file (SPEC §8).
type Config struct {
	Cluster   string              `json:"cluster"`
	Ray       RayHead             `json:"ray"`
	NodeTypes map[string]NodeType `json:"node_types"`
	GuestAPI  GuestAPIPolicy      `json:"guest_api"`
	// Provider names the built-in provider and its settings (head up).
	Provider *ProviderConfig `json:"provider,omitempty"`
	// PublicLogs puts RAYVAST_PUBLIC_LOGS=1 in the rental env of new
	// candidates, so their guest API serves /logs (to guest:logs tokens:
	// `head logs`). Off by default: a node's logs may hold what its jobs print.
	PublicLogs bool `json:"public_logs,omitempty"`
	// MaxDPHTotal caps the cluster's $/hour, spares included; 0 = no cap.
	MaxDPHTotal float64 `json:"max_dph_total,omitempty"`
	// Optional knobs beyond the SPEC's names; zero means the default.
	HeartbeatIntervalS     int `json:"heartbeat_interval_s,omitempty"`     // default 30
	HealthFailureThreshold int `json:"health_failure_threshold,omitempty"` // default 3
}

// RayHead names the Ray head the nodes join.
type RayHead struct {
	HeadAddress string `json:"head_address"`
	// Version and PythonVersion, where set, are what every node must run
	// (SPEC §6 step 6a); PythonVersion compares as many parts as it gives.
	Version       string `json:"version,omitempty"`
	PythonVersion string `json:"python_version,omitempty"`
}

// NodeType is one kind of worker and how many of it may join.
type NodeType struct {
	GPUs       int                `json:"gpus"`
	GPUModel   string             `json:"gpu_model,omitempty"` // SPEC §6 step 5
	CPUs       int                `json:"cpus,omitempty"`      // Ray's --num-cpus cap
	MinWorkers int                `json:"min_workers,omitempty"`
	MaxWorkers int                `json:"max_workers"`
	Resources  map[string]float64 `json:"resources"`
	Labels     map[string]string  `json:"labels"`
}

// ProviderConfig is the config's provider block: the kind and, for vast,
// what to rent (the API key is never here: file or env var).
type ProviderConfig struct {
	Kind       string               `json:"kind"` // none, docker or vast
	BaseURL    string               `json:"base_url,omitempty"`
	APIKeyFile string               `json:"api_key_file,omitempty"`
	Image      string               `json:"image,omitempty"`   // default image of every node type
	DiskGB     float64              `json:"disk_gb,omitempty"` // default 16
	NodeTypes  map[string]OfferSpec `json:"node_types,omitempty"`
	// IntervalsS overrides vast's minimum seconds between two requests
	// to one endpoint (search, create, show, list, destroy); the default
	// is vast's documented limits.
	IntervalsS map[string]float64 `json:"intervals_s,omitempty"`
	// Docker only: vast's network on one machine (docker.NetOptions).
	Hairpin bool `json:"hairpin,omitempty"` // a candidate reaches its own public IP:port
	PerIP   int  `json:"per_ip,omitempty"`  // candidates behind each public IP (default 1)
}

// OfferSpec narrows the vast offer search of one node type. The GPU count
// is the node type's gpus.
type OfferSpec struct {
	GPUName string  `json:"gpu_name,omitempty"` // vast's gpu_name, e.g. "RTX 4090"; "" = any
	MaxDPH  float64 `json:"max_dph,omitempty"`  // $/hour cap; 0 = any
	Image   string  `json:"image,omitempty"`
	DiskGB  float64 `json:"disk_gb,omitempty"`
}
