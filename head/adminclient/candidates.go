package adminclient

import (
	"context"
	"net/http"

	"github.com/rayvast/rayvast/internal/wire"
)

// Candidates lists every candidate (GET /v1/candidates).
func (c *Client) Candidates(ctx context.Context) ([]wire.Candidate, error) {
	var cs []wire.Candidate
	return cs, c.do(ctx, http.MethodGet, CandidatesPath, nil, &cs, http.StatusOK)
}

// Candidate reads one candidate (GET /v1/candidates/{id}).
func (c *Client) Candidate(ctx context.Context, id string) (wire.Candidate, error) {
	var cand wire.Candidate
	return cand, c.do(ctx, http.MethodGet, CandidatePath(id), nil, &cand, http.StatusOK)
}

// Create makes a candidate (POST /v1/candidates). The answer holds its
// join token and rental env: the caller keeps them only if it rents.
func (c *Client) Create(ctx context.Context, req wire.CandidateRequest) (wire.CandidateCreated, error) {
	var cr wire.CandidateCreated
	return cr, c.do(ctx, http.MethodPost, CandidatesPath, req, &cr, http.StatusCreated)
}

// Patch sets what an external provider learned of a candidate's rental
// (PATCH /v1/candidates/{id}) and returns the candidate as it is now.
func (c *Client) Patch(ctx context.Context, id string, p wire.CandidatePatch) (wire.Candidate, error) {
	var cand wire.Candidate
	return cand, c.do(ctx, http.MethodPatch, CandidatePath(id), p, &cand, http.StatusOK)
}

// End ends a candidate (DELETE /v1/candidates/{id}); the head records the
// reason "deleted" and its provider destroys the rental.
func (c *Client) End(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, CandidatePath(id), nil, nil, http.StatusNoContent)
}
