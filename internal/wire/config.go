package wire

import (
	"strings"
	"time"
)

// Config is the head's config file (docs/protocol.md §8).
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
	// Autoscaler, when present, hands the node count to Ray's autoscaler:
	// head up starts the Ray head with STATE/autoscaler.yaml and the plugin,
	// and the head's reconcile no longer scales node types itself.
	Autoscaler *AutoscalerConfig `json:"autoscaler,omitempty"`
	// Optional knobs beyond docs/protocol.md's names; zero means the default.
	HeartbeatIntervalS     int `json:"heartbeat_interval_s,omitempty"`     // default 30
	HealthFailureThreshold int `json:"health_failure_threshold,omitempty"` // default 3
	// UnheardLimitS is how long a node may go without a heartbeat answered
	// before it ends its own rental (absent: 1800; 0: never).
	UnheardLimitS *int `json:"unheard_limit_s,omitempty"`
}

// AutoscalerConfig is the config's autoscaler block.
type AutoscalerConfig struct {
	// IdleTimeoutMinutes is Ray's idle_timeout_minutes: a node idle this
	// long is ended (its rental too). 0 = 5 minutes.
	IdleTimeoutMinutes float64 `json:"idle_timeout_minutes,omitempty"`
}

// RayHead names the Ray head the nodes join.
type RayHead struct {
	HeadAddress string `json:"head_address"`
	// Version and PythonVersion, where set, are what every node must run
	// (docs/protocol.md §6 step 6a); PythonVersion compares as many parts as it gives.
	Version       string `json:"version,omitempty"`
	PythonVersion string `json:"python_version,omitempty"`
	// HeadResources are what the Ray head offers the cluster's work
	// (`head up`): "CPU", "GPU" and custom resources, whole numbers. None
	// by default (Ray's advice for a head node: tasks run on the rented
	// nodes, not beside the cluster CA's key).
	HeadResources map[string]float64 `json:"head_resources,omitempty"`
}

// NodeType is one kind of worker and how many of it may join.
type NodeType struct {
	GPUs       int                `json:"gpus"`
	GPUModel   string             `json:"gpu_model,omitempty"` // docs/protocol.md §6 step 5
	CPUs       int                `json:"cpus,omitempty"`      // Ray's --num-cpus cap
	MinWorkers int                `json:"min_workers,omitempty"`
	MaxWorkers int                `json:"max_workers"`
	Resources  map[string]float64 `json:"resources"`
	Labels     map[string]string  `json:"labels"`
}

// The provider kinds (ProviderConfig.Kind, --provider, GET /v1/provider's
// kind): none is an external provider driving the admin API.
const (
	ProviderNone   = "none"
	ProviderDocker = "docker"
	ProviderVast   = "vast"
)

// ProviderConfig is the config's provider block: the kind and, for vast,
// what to rent (the API key is never here: file or env var).
type ProviderConfig struct {
	Kind       string               `json:"kind"` // none, docker or vast
	BaseURL    string               `json:"base_url,omitempty"`
	APIKeyFile string               `json:"api_key_file,omitempty"`
	Image      string               `json:"image,omitempty"`   // default image of every node type
	DiskGB     float64              `json:"disk_gb,omitempty"` // default 16
	NodeTypes  map[string]OfferSpec `json:"node_types,omitempty"`
	// OfferFilters are the offer filters of every node type (a node
	// type's own win, field by field); unset ones take safe defaults.
	OfferFilters
	// IntervalsS overrides vast's minimum seconds between two requests
	// to one endpoint (search, create, show, list, destroy); the default
	// is vast's documented limits.
	IntervalsS map[string]float64 `json:"intervals_s,omitempty"`
	// ReplaceBeforeEndS: a rental whose contract ends (vast's end_date)
	// within this many seconds gets a replacement rented; it is ended once
	// the replacement enrolled, or at its end date. Absent: 7200; 0: none
	// (the rental is ended at its end date and replaced then).
	ReplaceBeforeEndS *int `json:"replace_before_end_s,omitempty"`
	// PriceIncreaseMaxDPH: a host's pending price increase is rejected
	// (0, the default) or, when set, accepted up to this $/hour, the
	// rental ended and replaced when its new price would be above it.
	PriceIncreaseMaxDPH float64 `json:"price_increase_max_dph,omitempty"`
	// Docker only: vast's network on one machine (head/vastnet.Options).
	Hairpin bool `json:"hairpin,omitempty"` // a candidate reaches its own public IP:port
	PerIP   int  `json:"per_ip,omitempty"`  // candidates behind each public IP (default 1)
	// None only: the nodes reach the head over a network no stranger is
	// on (a LAN, a VPN), so --firewall auto leaves the head's ports open.
	PrivateNetwork bool `json:"private_network,omitempty"`
}

// OfferSpec narrows the vast offer search of one node type. The GPU count
// is the node type's gpus.
type OfferSpec struct {
	GPUName string  `json:"gpu_name,omitempty"` // vast's gpu_name, e.g. "RTX 4090"; "" = any
	MaxDPH  float64 `json:"max_dph,omitempty"`  // $/hour cap; 0 = any
	Image   string  `json:"image,omitempty"`
	DiskGB  float64 `json:"disk_gb,omitempty"`
	// Interruptible, when set, rents this node type as bids; its
	// max_bid_dph is the cap (max_dph is refused beside it).
	Interruptible *BidPolicy `json:"interruptible,omitempty"`
	OfferFilters
}

// OfferFilters narrow vast's offer search by the fields of its offers
// (head/provider/vast applies the defaults; nil or empty = the default).
// Each named field is a minimum unless it says otherwise.
type OfferFilters struct {
	Reliability2 *float64 `json:"reliability2,omitempty"`  // 0-1, default 0.98
	Verified     *bool    `json:"verified,omitempty"`      // default true
	CUDAMaxGood  *float64 `json:"cuda_max_good,omitempty"` // the host driver's CUDA; default from the image
	InetDown     *float64 `json:"inet_down,omitempty"`     // vast's unit, default 100
	InetUp       *float64 `json:"inet_up,omitempty"`       // default 100
	Datacenter   *bool    `json:"datacenter,omitempty"`    // true: vast's secure cloud only; default any
	Geolocation  []string `json:"geolocation,omitempty"`   // country codes; default any
	// Search passes any other field of vast's offer search through:
	// {"field": {"op": value}}, op one of eq neq gt gte lt lte in notin.
	Search map[string]map[string]any `json:"search,omitempty"`
}

// ProviderStatus is what the built-in provider says of itself on the
// admin API (GET /v1/provider): why it rents nothing now, if it does not.
type ProviderStatus struct {
	Kind string `json:"kind"`
	// Halted is vast's reason for renting nothing ("" = renting):
	// search_quota_exceeded, auth_error or billing.
	Halted string     `json:"halted,omitempty"`
	Detail string     `json:"detail,omitempty"`
	Until  *time.Time `json:"until,omitempty"` // when renting may resume; nil = until fixed
	// Rentals are the live rentals with terms to show: a bid, an end
	// date, a pending price increase (vast).
	Rentals []RentalTerms `json:"rentals,omitempty"`
}

// NormGPUModel is how a node type's gpu_model and the GPU models a node
// reports are compared (docs/protocol.md §6 step 5): lower case, without spaces, tabs,
// '-' and '_', then without a leading "nvidia". The config refuses a
// gpu_model that normalises to nothing; enrollment matches by containment.
func NormGPUModel(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '-', '_':
			return -1
		}
		return r
	}, strings.ToLower(s))
	return strings.TrimPrefix(s, "nvidia")
}
