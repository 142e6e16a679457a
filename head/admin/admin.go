// Package admin serves the head's admin API (docs/protocol.md §8) on the Unix socket
// STATE/admin.sock (0600): candidates, nodes, the blocklist, the provider's
// status and /metrics.
// Whoever can open the socket is the cluster owner or their provider.
package admin

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/answer"
	"github.com/rayvast/rayvast/internal/wire"
)

// Rentals is what the admin API needs of the provider driver.
type Rentals interface {
	Rent(c wire.Candidate, env map[string]string)
	End(candidateID, reason string) (wire.Candidate, error)
}

// Env is the non-secret part of every candidate's rental env (docs/protocol.md §2).
type Env struct {
	Head            string // head IP literal
	PortA, PortB    int
	BootstrapSHA256 string
	CASHA256        string
	PublicLogs      bool // the config's public_logs: RAYVAST_PUBLIC_LOGS=1
}

// Config builds a Server.
type Config struct {
	Registry  *registry.Registry
	Blocklist *blocklist.List
	Rentals   Rentals
	// Provider says why the built-in provider rents nothing now, if it
	// does not (GET /v1/provider); nil: kind "none".
	Provider  func() wire.ProviderStatus
	NodeTypes map[string]wire.NodeType
	// Paused, when set, refuses new candidates of a node type whose
	// renting is paused (409 node_type_paused): set when Ray's autoscaler
	// creates the candidates, so it cannot rent a failing type forever.
	Paused  func(nodeType string) bool
	Env     Env
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Server is the admin API handler.
type Server struct{ cfg Config }

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = &metrics.Metrics{}
	}
	return &Server{cfg: cfg}
}

// Listen opens the admin socket at path with mode 0600, replacing a stale one.
func Listen(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale admin socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod admin socket: %w", err)
	}
	return ln, nil
}

// Handler routes the admin API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	h := func(f func(http.ResponseWriter, *http.Request) error) http.Handler { return answer.Func(s.cfg.Log, f) }
	mux.Handle("POST /v1/candidates", h(s.create))
	mux.Handle("GET /v1/candidates", h(s.listCandidates))
	mux.Handle("PATCH /v1/candidates/{id}", h(s.patch))
	mux.Handle("DELETE /v1/candidates/{id}", h(s.delete))
	mux.Handle("GET /v1/candidates/{id}", h(s.getCandidate))
	mux.Handle("GET /v1/nodes", h(s.listNodes))
	mux.Handle("GET /v1/blocklist", h(s.listBlocklist))
	mux.Handle("GET /v1/provider", h(s.providerStatus))
	mux.HandleFunc("GET /metrics", s.metrics)
	return mux
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) error {
	var req wire.CandidateRequest
	if err := answer.Decode(w, r, &req); err != nil {
		return err
	}
	c, env, err := s.Create(req)
	if err != nil {
		return err
	}
	answer.JSON(w, http.StatusCreated, wire.CandidateCreated{CandidateID: c.CandidateID, JoinToken: env[wire.EnvJoinToken], Env: env})
	return nil
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request) error {
	var p wire.CandidatePatch
	if err := answer.Decode(w, r, &p); err != nil {
		return err
	}
	if e, bad := s.cfg.Blocklist.Blocked(p.HostID); bad && p.HostID != "" {
		return answer.Errorf(http.StatusConflict, "host_blocklisted", fmt.Sprintf("host %s is blocklisted (%s)", e.HostID, e.Class), nil)
	}
	c, err := s.cfg.Registry.Patch(r.PathValue("id"), p)
	if err != nil {
		return registryError(err)
	}
	s.cfg.Log.Info("candidate updated", "candidate", c.CandidateID, "state", c.State, "instance", c.InstanceID, "public_ip", c.PublicIP)
	answer.JSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.End(r.PathValue("id"), "deleted"); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getCandidate(w http.ResponseWriter, r *http.Request) error {
	c, ok := s.cfg.Registry.Candidate(r.PathValue("id"))
	if !ok {
		return registryError(registry.ErrNotFound)
	}
	answer.JSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) listCandidates(w http.ResponseWriter, r *http.Request) error {
	answer.JSON(w, http.StatusOK, s.Candidates())
	return nil
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) error {
	answer.JSON(w, http.StatusOK, s.Nodes())
	return nil
}

func (s *Server) listBlocklist(w http.ResponseWriter, r *http.Request) error {
	e := s.cfg.Blocklist.Entries()
	if e == nil {
		e = []wire.BlockEntry{}
	}
	answer.JSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) providerStatus(w http.ResponseWriter, r *http.Request) error {
	st := wire.ProviderStatus{Kind: wire.ProviderNone}
	if s.cfg.Provider != nil {
		st = s.cfg.Provider()
	}
	answer.JSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.cfg.Metrics.Write(w, s.cfg.Registry.Candidates(), s.cfg.Registry.Nodes())
}

func registryError(err error) error {
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return answer.Errorf(http.StatusNotFound, "not_found", "no such candidate", nil)
	case errors.Is(err, registry.ErrConflict):
		return answer.Errorf(http.StatusConflict, "conflict", err.Error(), nil)
	case errors.Is(err, registry.ErrInvalid):
		return answer.Errorf(http.StatusBadRequest, "bad_request", err.Error(), nil)
	}
	return err
}
