package wire

import (
	"encoding/base64"
	"fmt"
	"regexp"
)

// Check is one host check result (docs/protocol.md §5).
type Check struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// EgressCheck is the egress check result with the IP the resolvers saw.
type EgressCheck struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	IP     string `json:"ip"`
}

// Checks are the host checks an agent reports at enrollment.
type Checks struct {
	Capabilities Check       `json:"capabilities"`
	Netns        Check       `json:"netns"`
	Shm          Check       `json:"shm"`
	Egress       EgressCheck `json:"egress"`
}

// CheckReport is what `agent check` prints.
type CheckReport struct {
	Checks    Checks   `json:"checks"`
	GPUs      int      `json:"gpus"`
	GPUModels []string `json:"gpu_models"`
	// RayVersion and PythonVersion are what the found Python reported
	// ("" = not found); the enroll request carries the same values.
	RayVersion    string `json:"ray_version"`
	PythonVersion string `json:"python_version"`
}

// EnrollRequest is the body of POST /enroll (docs/protocol.md §6).
type EnrollRequest struct {
	Version    int    `json:"version"`
	InstanceID string `json:"instance_id"`
	JoinToken  string `json:"join_token"` // secret
	Checks     Checks `json:"checks"`
	GPUs       int    `json:"gpus"`
	// GPUModels are the Model: lines of /proc/driver/nvidia/gpus/*/information.
	GPUModels []string `json:"gpu_models"`
	// RayVersion and PythonVersion are what the found Python reports
	// (ray.__version__, platform.python_version()); the head judges them.
	RayVersion    string `json:"ray_version"`
	PythonVersion string `json:"python_version"`
	Ports         []int  `json:"ports"`
	PortKey       string `json:"port_key"` // secret, base64 of 32 bytes
}

var instanceIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ValidInstanceID reports whether id is 1–64 of [A-Za-z0-9._-].
func ValidInstanceID(id string) bool { return instanceIDRe.MatchString(id) }

// JoinTokenLen is the length of a join token: 32 bytes, base64url, no padding.
const JoinTokenLen = 43

// Validate checks the shape of the request (step 1 of the decision order).
// Its errors never quote the token or the port key.
func (r *EnrollRequest) Validate() error {
	if r.Version != Version {
		return fmt.Errorf("version %d not supported", r.Version)
	}
	if !ValidInstanceID(r.InstanceID) {
		return fmt.Errorf("instance_id must be 1-64 of [A-Za-z0-9._-]")
	}
	if len(r.JoinToken) != JoinTokenLen {
		return fmt.Errorf("join_token must be %d characters", JoinTokenLen)
	}
	if r.GPUs < 0 {
		return fmt.Errorf("gpus must not be negative")
	}
	if len(r.GPUModels) > 64 {
		return fmt.Errorf("gpu_models: at most 64 entries")
	}
	for _, m := range r.GPUModels {
		if len(m) > 128 {
			return fmt.Errorf("gpu_models: an entry is longer than 128 bytes")
		}
	}
	if len(r.RayVersion) > 64 || len(r.PythonVersion) > 64 {
		return fmt.Errorf("ray_version and python_version: at most 64 bytes")
	}
	if err := ValidatePorts(r.Ports); err != nil {
		return err
	}
	if k, err := base64.StdEncoding.DecodeString(r.PortKey); err != nil || len(k) != 32 {
		return fmt.Errorf("port_key must be base64 of 32 bytes")
	}
	return nil
}

// ValidatePorts checks for exactly 64 distinct ports in 1..65535.
func ValidatePorts(ports []int) error {
	if len(ports) != PortCount {
		return fmt.Errorf("ports must list %d ports, got %d", PortCount, len(ports))
	}
	seen := make(map[int]bool, len(ports))
	for _, p := range ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("port %d out of range 1..65535", p)
		}
		if seen[p] {
			return fmt.Errorf("port %d listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

// Refusal errors and rejection reasons of POST /enroll and port B.
const (
	ErrRefused   = "refused"   // 403 before a valid token: same bytes for every cause
	ErrRejected  = "rejected"  // 403 after a valid token, with a Reason
	ErrForbidden = "forbidden" // 403 on port B
	ErrBusy      = "busy"      // 503 from /enroll: no port check turn in time; retry the same request

	ReasonSecurityCheck = "security_check"
	ReasonGPUCount      = "gpu_count"
	ReasonGPUModel      = "gpu_model"
	ReasonEgress        = "egress"
	ReasonRayVersion    = "ray_version"
	ReasonPortCheck     = "port_check"
	ReasonSharedIP      = "shared_ip"
	ReasonNoSlot        = "no_slot"
)

// ErrorBody is every JSON error answer: {"error":…} plus reason after a valid token.
type ErrorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
}

// EnrollResponse is the 200 bundle of POST /enroll (docs/protocol.md §6).
type EnrollResponse struct {
	Version      int             `json:"version"`
	NodeCert     string          `json:"node_cert"`
	NodeKey      string          `json:"node_key"` // secret, PEM PKCS#8
	CACert       string          `json:"ca_cert"`
	ClusterToken string          `json:"cluster_token"` // secret
	AppID        string          `json:"app_id"`
	AppRootKey   string          `json:"app_root_key"` // secret, base64 of 32 bytes
	CandidateID  string          `json:"candidate_id"` // Ray's RAY_CLOUD_INSTANCE_ID
	NodeType     string          `json:"node_type"`    // Ray's RAY_NODE_TYPE_NAME
	Shim         *Shim           `json:"shim"`
	Ray          RayParams       `json:"ray"`
	GuestAPI     GuestAPIGrant   `json:"guest_api"`
	Heartbeat    HeartbeatParams `json:"heartbeat"`
	// Mesh is absent from a head that carries no collective traffic.
	Mesh *MeshGrant `json:"mesh,omitempty"`
}

// Shim is a Python file put first on Ray's PYTHONPATH.
type Shim struct {
	Name       string `json:"name"`
	ContentB64 string `json:"content_b64"`
}

// RayParams are the arguments of `ray start` (docs/protocol.md §9).
type RayParams struct {
	HeadAddress              string             `json:"head_address"`
	NodeIPAddress            string             `json:"node_ip_address"`
	NodeName                 string             `json:"node_name"` // the instance id
	NodeManagerPort          int                `json:"node_manager_port"`
	ObjectManagerPort        int                `json:"object_manager_port"`
	RuntimeEnvAgentPort      int                `json:"runtime_env_agent_port"`
	DashboardAgentGRPCPort   int                `json:"dashboard_agent_grpc_port"`
	DashboardAgentListenPort int                `json:"dashboard_agent_listen_port"`
	MetricsExportPort        int                `json:"metrics_export_port"`
	WorkerPorts              []int              `json:"worker_ports"`
	NumGPUs                  int                `json:"num_gpus"`
	NumCPUs                  int                `json:"num_cpus"` // the head's cap; the agent may pass fewer
	Resources                map[string]float64 `json:"resources"`
	Labels                   map[string]string  `json:"labels"`
}

// GuestAPIPolicy is who may ask the guest API what without the app's own
// token: the seed's guest_agent_api block.
type GuestAPIPolicy struct {
	AnonymousScopes []string `json:"anonymous_scopes"`
	ExternalIssuers []Issuer `json:"external_issuers"`
}

// Issuer is an external token issuer: iss must equal Name; PublicKeys are
// hex Ed25519 public keys (a list, so keys can be rotated).
type Issuer struct {
	Name       string   `json:"name"`
	PublicKeys []string `json:"public_keys"`
}

// GuestAPIGrant is the guest_api block of the bundle: the port plus the policy.
type GuestAPIGrant struct {
	Port int `json:"port"`
	GuestAPIPolicy
}

// HeartbeatParams tell the node where and how often to heartbeat.
type HeartbeatParams struct {
	Port      int `json:"port"`
	IntervalS int `json:"interval_s"`
	// UnheardLimitS is how long the node may go without a heartbeat
	// answered before it ends its own rental (docs/protocol.md §9); 0 or absent: never.
	UnheardLimitS int `json:"unheard_limit_s,omitempty"`
	// SelfEnd names how the head's provider expects a node to end its own
	// rental: "vast" (destroy its instance with CONTAINER_API_KEY); absent:
	// by the agent's exit.
	SelfEnd string `json:"self_end,omitempty"`
}
