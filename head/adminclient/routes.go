package adminclient

import "net/url"

// The admin API's routes (docs/protocol.md §8), as head/admin serves them.
// Exported for what must show a route to a person (the demo's curl hint);
// code calls the typed methods.
const (
	CandidatesPath = "/v1/candidates"
	NodesPath      = "/v1/nodes"
	BlocklistPath  = "/v1/blocklist"
	ProviderPath   = "/v1/provider"
	MetricsPath    = "/metrics"
)

// CandidatePath is one candidate's route.
func CandidatePath(id string) string { return CandidatesPath + "/" + url.PathEscape(id) }
