package adminclient

import (
	"context"
	"net/http"

	"github.com/rayvast/rayvast/internal/wire"
)

// Nodes lists the nodes the head enrolled (GET /v1/nodes).
func (c *Client) Nodes(ctx context.Context) ([]wire.Node, error) {
	var ns []wire.Node
	return ns, c.do(ctx, http.MethodGet, NodesPath, nil, &ns, http.StatusOK)
}

// Blocklist lists the blocklisted hosts (GET /v1/blocklist).
func (c *Client) Blocklist(ctx context.Context) ([]wire.BlockEntry, error) {
	var bl []wire.BlockEntry
	return bl, c.do(ctx, http.MethodGet, BlocklistPath, nil, &bl, http.StatusOK)
}

// Provider says why the built-in provider rents nothing now, if it does
// not (GET /v1/provider).
func (c *Client) Provider(ctx context.Context) (wire.ProviderStatus, error) {
	var st wire.ProviderStatus
	return st, c.do(ctx, http.MethodGet, ProviderPath, nil, &st, http.StatusOK)
}

// Metrics is the head's Prometheus text (GET /metrics).
func (c *Client) Metrics(ctx context.Context) (string, error) {
	b, err := c.send(ctx, http.MethodGet, MetricsPath, nil, http.StatusOK)
	return string(b), err
}

// Snapshot is the cluster as `head status` and `head logs` show it.
type Snapshot struct {
	Candidates []wire.Candidate
	Nodes      []wire.Node
}

// Snapshot lists the candidates, then the nodes; either failing fails it.
func (c *Client) Snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	var err error
	if s.Candidates, err = c.Candidates(ctx); err != nil {
		return Snapshot{}, err
	}
	if s.Nodes, err = c.Nodes(ctx); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}
