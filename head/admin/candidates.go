package admin

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/rayvast/rayvast/internal/answer"
	"github.com/rayvast/rayvast/internal/wire"
)

// The candidate calls as Go methods: the HTTP handlers and `head serve`'s
// reconcile loop both call them, so a candidate the loop makes is made
// exactly like one an autoscaler asks for, without a round trip through
// HTTP. Errors are *answer.Error: the handlers answer with them as they are.

// Candidates lists every candidate (GET /v1/candidates).
func (s *Server) Candidates() []wire.Candidate { return s.cfg.Registry.Candidates() }

// Nodes is GET /v1/nodes's answer, for the head's own callers.
func (s *Server) Nodes() []wire.Node { return s.cfg.Registry.Nodes() }

// Create makes a candidate (POST /v1/candidates) and hands it to the
// provider driver to rent with env, the docs/protocol.md §2 rental env, join token
// included.
func (s *Server) Create(req wire.CandidateRequest) (c wire.Candidate, env map[string]string, err error) {
	if _, ok := s.cfg.NodeTypes[req.NodeType]; !ok {
		return c, nil, answer.Errorf(http.StatusBadRequest, "bad_request", fmt.Sprintf("unknown node_type %q", req.NodeType), nil)
	}
	if s.cfg.Paused != nil && s.cfg.Paused(req.NodeType) {
		return c, nil, answer.Errorf(http.StatusConflict, "node_type_paused",
			fmt.Sprintf("renting of node type %s is paused: too many of its candidates failed (the head's log says why)", req.NodeType), nil)
	}
	if e, bad := s.cfg.Blocklist.Blocked(req.HostID); bad && req.HostID != "" {
		return c, nil, answer.Errorf(http.StatusConflict, "host_blocklisted",
			fmt.Sprintf("host %s is blocklisted (%s) until %s", e.HostID, e.Class, e.Until.Format("2006-01-02T15:04:05Z07:00")), nil)
	}
	c, tok, err := s.cfg.Registry.NewCandidate(req)
	if err != nil {
		return c, nil, registryError(err)
	}
	env = map[string]string{
		wire.EnvHead:            s.cfg.Env.Head,
		wire.EnvPortA:           strconv.Itoa(s.cfg.Env.PortA),
		wire.EnvPortB:           strconv.Itoa(s.cfg.Env.PortB),
		wire.EnvBootstrapSHA256: s.cfg.Env.BootstrapSHA256,
		wire.EnvCASHA256:        s.cfg.Env.CASHA256,
		wire.EnvJoinToken:       tok.Reveal(),
	}
	if s.cfg.Env.PublicLogs {
		env[wire.EnvPublicLogs] = "1"
	}
	if c.InstanceID != "" {
		env[wire.EnvInstanceID] = c.InstanceID
	}
	if c.PublicIP != "" {
		env[wire.EnvPublicIP] = c.PublicIP
	}
	s.cfg.Log.Info("candidate created", "candidate", c.CandidateID, "node_type", c.NodeType, "instance", c.InstanceID, "public_ip", c.PublicIP, "host", c.HostID)
	s.cfg.Rentals.Rent(c, env)
	return c, env, nil
}

// End ends a candidate for reason (DELETE /v1/candidates/{id} records
// "deleted"); the provider driver destroys its instance.
func (s *Server) End(candidateID, reason string) (wire.Candidate, error) {
	c, err := s.cfg.Rentals.End(candidateID, reason)
	if err != nil {
		return c, registryError(err)
	}
	s.cfg.Log.Info("candidate ended", "candidate", c.CandidateID, "instance", c.InstanceID, "reason", reason)
	return c, nil
}

// Reprice records a live candidate's new $/hour (its host's price
// increase was accepted), so max_dph_total counts what it costs now.
func (s *Server) Reprice(candidateID string, dph float64) error {
	if _, err := s.cfg.Registry.Patch(candidateID, wire.CandidatePatch{DPHTotal: dph}); err != nil {
		return registryError(err)
	}
	s.cfg.Log.Info("candidate repriced", "candidate", candidateID, "dph_total", dph)
	return nil
}
