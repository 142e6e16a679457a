package teardown

import (
	"context"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/internal/wire"
)

// Socket is the Cluster of a head reached over its admin socket at path:
// what the `head down` verb uses.
func Socket(path string) Cluster { return socket{adminclient.Unix(path, 30*time.Second)} }

type socket struct{ c *adminclient.Client }

func (s socket) Candidates(ctx context.Context) ([]wire.Candidate, error) { return s.c.Candidates(ctx) }

// End drops the reason: the admin API records "deleted" for what it ends.
func (s socket) End(ctx context.Context, candidateID, _ string) error {
	return s.c.End(ctx, candidateID)
}
