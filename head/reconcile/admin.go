package reconcile

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/internal/wire"
)

// Admin is a Cluster over the admin API on its Unix socket: what `head
// down` and external tools use.
type Admin struct {
	*adminclient.Client
}

// AdminSocket talks to the admin API on a Unix socket.
func AdminSocket(path string) *Admin {
	return &Admin{Client: adminclient.Unix(path, 30*time.Second)}
}

// Candidates implements Cluster.
func (a *Admin) Candidates(ctx context.Context) ([]wire.Candidate, error) {
	var cs []wire.Candidate
	return cs, a.Do(ctx, http.MethodGet, "/v1/candidates", nil, &cs, http.StatusOK)
}

// Create implements Cluster. The join token in the answer is dropped at
// once: the head already gave it to its provider.
func (a *Admin) Create(ctx context.Context, nodeType string) (wire.Candidate, error) {
	var cr wire.CandidateCreated
	if err := a.Do(ctx, http.MethodPost, "/v1/candidates", wire.CandidateRequest{NodeType: nodeType}, &cr, http.StatusCreated); err != nil {
		return wire.Candidate{}, err
	}
	return wire.Candidate{CandidateID: cr.CandidateID, NodeType: nodeType, State: wire.StatePending}, nil
}

// End implements Cluster. The admin API records the reason "deleted".
func (a *Admin) End(ctx context.Context, candidateID, reason string) error {
	return a.Do(ctx, http.MethodDelete, "/v1/candidates/"+url.PathEscape(candidateID), nil, nil, http.StatusNoContent)
}

// InProcess is the Cluster `head serve` gives its loop: the admin API's Go
// methods, the code its HTTP handlers run, with the loop's reasons kept.
func InProcess(s *admin.Server) Cluster { return inProcess{s} }

type inProcess struct{ s *admin.Server }

func (a inProcess) Candidates(context.Context) ([]wire.Candidate, error) {
	return a.s.Candidates(), nil
}

// Create drops the rental env at once: the admin API already gave it,
// join token and all, to the head's provider driver.
func (a inProcess) Create(_ context.Context, nodeType string) (wire.Candidate, error) {
	c, _, err := a.s.Create(wire.CandidateRequest{NodeType: nodeType})
	return c, err
}

func (a inProcess) End(_ context.Context, candidateID, reason string) error {
	_, err := a.s.End(candidateID, reason)
	return err
}

// Reprice implements Repricer.
func (a inProcess) Reprice(_ context.Context, candidateID string, dph float64) error {
	return a.s.Reprice(candidateID, dph)
}
