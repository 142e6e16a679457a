package wire

import "time"

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
