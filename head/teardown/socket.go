package teardown

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/internal/wire"
)

// Socket is the Cluster of a head reached over its admin socket at path:
// what the `head down` verb uses. The admin API records the reason
// "deleted" for the candidates it ends.
func Socket(path string) Cluster { return socket{adminclient.Unix(path, 30*time.Second)} }

type socket struct{ c *adminclient.Client }

func (s socket) Candidates(ctx context.Context) ([]wire.Candidate, error) {
	var cs []wire.Candidate
	return cs, s.c.Do(ctx, http.MethodGet, "/v1/candidates", nil, &cs, http.StatusOK)
}

func (s socket) End(ctx context.Context, candidateID, _ string) error {
	return s.c.Do(ctx, http.MethodDelete, "/v1/candidates/"+url.PathEscape(candidateID), nil, nil, http.StatusNoContent)
}
