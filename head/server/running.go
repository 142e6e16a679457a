package server

import (
	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/internal/wire"
)

// Server is a running head as its own process sees it: the addresses it
// listens on and its admin API's Go methods, the code the admin socket's
// handlers run. `head up` follows its candidates and ends them through
// these, so it never connects to its own admin socket.
type Server struct {
	PortA, PortB, AdminSocket string
	admin                     *admin.Server
	done                      chan struct{} // closed when Run returns
}

// Done is closed when the head has stopped serving.
func (s *Server) Done() <-chan struct{} { return s.done }

// Candidates is every candidate, as GET /v1/candidates lists them.
func (s *Server) Candidates() []wire.Candidate { return s.admin.Candidates() }

// Nodes is every node, as GET /v1/nodes lists them.
func (s *Server) Nodes() []wire.Node { return s.admin.Nodes() }

// Cluster is the admin API in-process, with the reasons its callers give
// kept (over the socket every end is "deleted"): what --down-on-exit ends
// the candidates through.
func (s *Server) Cluster() reconcile.Cluster { return reconcile.InProcess(s.admin) }
