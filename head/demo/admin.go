package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/internal/wire"
)

// adminClient speaks the head's admin API on STATE/admin.sock (docs/protocol.md §8).
type adminClient struct {
	c *adminclient.Client
}

func newAdminClient(socket string) *adminClient {
	return &adminClient{c: adminclient.Unix(socket, 10*time.Second)}
}

// createCandidate asks the head for a candidate; with the docker provider
// the head rents its container itself. The join token in the answer is not
// kept: the demo has no use for it.
func (a *adminClient) createCandidate(ctx context.Context, nodeType string) (string, error) {
	var out wire.CandidateCreated
	if err := a.c.Do(ctx, http.MethodPost, "/v1/candidates", wire.CandidateRequest{NodeType: nodeType}, &out, http.StatusCreated); err != nil {
		return "", err
	}
	return out.CandidateID, nil
}

func (a *adminClient) candidates(ctx context.Context) ([]wire.Candidate, error) {
	var out []wire.Candidate
	return out, a.list(ctx, "/v1/candidates", &out)
}

func (a *adminClient) nodes(ctx context.Context) ([]wire.Node, error) {
	var out []wire.Node
	return out, a.list(ctx, "/v1/nodes", &out)
}

func (a *adminClient) blocklist(ctx context.Context) ([]wire.BlockEntry, error) {
	var out []wire.BlockEntry
	return out, a.list(ctx, "/v1/blocklist", &out)
}

// list GETs a list, as a bare JSON array or an object wrapping one.
func (a *adminClient) list(ctx context.Context, path string, out any) error {
	var raw json.RawMessage
	if err := a.c.Do(ctx, http.MethodGet, path, nil, &raw, http.StatusOK); err != nil {
		return err
	}
	return decodeList(raw, out)
}

func decodeList(raw json.RawMessage, out any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return err
		}
		for _, v := range obj {
			if v = bytes.TrimSpace(v); len(v) > 0 && v[0] == '[' {
				return json.Unmarshal(v, out)
			}
		}
		return nil
	}
	if string(raw) == "null" || len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, out)
}
