package reconcile

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/internal/wire"
)

// Admin is a Cluster over the admin API: on the Unix socket (AdminSocket,
// what `head down` and external tools use) or in-process on the admin
// handler (AdminHandler, what `head serve` uses: the same code path without
// a socket round trip).
type Admin struct {
	*adminclient.Client
	// EndWith, when set, ends candidates instead of DELETE, so the reason
	// is recorded (the admin API records "deleted").
	EndWith func(candidateID, reason string) error
}

// AdminSocket talks to the admin API on a Unix socket.
func AdminSocket(path string) *Admin {
	return &Admin{Client: adminclient.Unix(path, 30*time.Second)}
}

// AdminHandler calls the admin handler in-process.
func AdminHandler(h http.Handler) *Admin {
	return &Admin{Client: adminclient.Handler(h)}
}

// InProcess is what `head serve` uses: the admin handler for listing and
// creating, and the provider driver's End (so the reason is kept) for ending.
func InProcess(h http.Handler, end func(candidateID, reason string) (wire.Candidate, error)) *Admin {
	a := AdminHandler(h)
	a.EndWith = func(id, reason string) error { _, err := end(id, reason); return err }
	return a
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

// End implements Cluster.
func (a *Admin) End(ctx context.Context, candidateID, reason string) error {
	if a.EndWith != nil {
		return a.EndWith(candidateID, reason)
	}
	return a.Do(ctx, http.MethodDelete, "/v1/candidates/"+url.PathEscape(candidateID), nil, nil, http.StatusNoContent)
}
