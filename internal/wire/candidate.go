package wire

import "time"

// Candidate and node states (docs/protocol.md §8).
const (
	StatePending          = "pending"           // created, no instance yet
	StateRented           = "rented"            // instance id known, no public IP yet
	StateRunning          = "running"           // public IP known: may enroll
	StateEnrolled         = "enrolled"          // a node
	StateLost             = "lost"              // no heartbeat for 3 intervals
	StateEnded            = "ended"             // token dead, heartbeats refused
	StateDestroyRequested = "destroy_requested" // an external provider must end it
)

// Live is whether a candidate in state may still become, or is, a node:
// its join token and certificate count, and the firewall lets its IP in.
// The one owner of that rule; destroy_requested is not live (the head has
// let it go) though it may still bill until the provider ends it.
func Live(state string) bool {
	return state != StateEnded && state != StateDestroyRequested
}

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
// RAYVAST_* vars of docs/protocol.md §2 for the rental request, join token included.
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
	// Reported is what the candidate's agent reported when it was rejected
	// after proving its token (docs/protocol.md §6 steps 4–8): its host checks, GPUs and
	// versions, for `head node`. Check details are cut to ReportDetailMax
	// bytes; it came from the host, so it is shown made inert.
	Reported *CheckReport `json:"reported,omitempty"`
}

// ReportDetailMax bounds each check detail kept in Candidate.Reported.
const ReportDetailMax = 256
