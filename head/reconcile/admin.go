package reconcile

import (
	"context"

	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/internal/wire"
)

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
