// Package nodeapi serves port B (docs/protocol.md §7): mutual TLS with node
// certificates from the cluster CA, every per-request check, POST /heartbeat
// and POST /report; and the loops that mark silent nodes lost and poll the
// nodes' guest API health.
package nodeapi

import (
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/answer"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// Config builds a Server.
type Config struct {
	Registry *registry.Registry
	CA       *x509.CertPool // the cluster CA only
	Interval time.Duration  // heartbeat interval told to nodes
	Metrics  *metrics.Metrics
	// Destroy ends a node's candidate at once (through the provider, as a
	// lost node is): called on a ray_crashloop report. Nil: only logged.
	Destroy func(candidateID, reason string)
	// RayHead is the ID of the Ray head that runs now (ok false while none
	// is up); heartbeat answers carry it so nodes whose Ray joined an
	// earlier one restart theirs at once. Nil: the head runs no Ray head.
	RayHead func() (id string, ok bool)
	// Drain says whether the head drains the node with this instance ID
	// before a planned end, and the deadline (reconcile.Drains.Of); its
	// heartbeat answers then carry the drain notice. Nil: no drains.
	Drain func(instanceID string) (deadline time.Time, ok bool)
	Log   *slog.Logger
	Now   func() time.Time
}

// Server is the port B handler.
type Server struct {
	cfg    Config
	mu     sync.Mutex
	tokens map[string]secret.String // latest health token per instance, memory only
	v      verdicts                 // chain verdicts by connection (verify.go)
	mesh   *meshCache               // the last mesh membership built (mesh.go)
}

// New returns a Server; Metrics, Log and Now default when nil.
func New(cfg Config) *Server {
	if cfg.Metrics == nil {
		cfg.Metrics = &metrics.Metrics{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{cfg: cfg, tokens: map[string]secret.String{}, v: verdicts{m: map[weak.Pointer[x509.Certificate]]verdict{}}}
}

// Handler routes port B.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /heartbeat", answer.Func(s.cfg.Log, s.heartbeat))
	mux.Handle("POST /report", answer.Func(s.cfg.Log, s.report))
	return answer.CleanPathsOnly(mux)
}

// IntervalS is the heartbeat interval in whole seconds (at least 1).
func (s *Server) IntervalS() int { return max(1, int(s.cfg.Interval/time.Second)) }

func (s *Server) forbidden(reason string, cause error) error {
	s.cfg.Metrics.Refusal("port_b", reason)
	return &answer.Error{Status: http.StatusForbidden, Body: wire.ErrorBody{Error: wire.ErrForbidden}, Reason: reason, Cause: cause}
}

// unknownNode is port B's 403 for an instance the head has not enrolled or
// has ended: docs/protocol.md §7's body, and a header that says so, on which the node
// ends its own rental.
func (s *Server) unknownNode(cause error) error {
	s.cfg.Metrics.Refusal("port_b", "not_enrolled_or_ended")
	return &answer.Error{Status: http.StatusForbidden, Body: wire.ErrorBody{Error: wire.ErrForbidden}, Reason: "not_enrolled_or_ended", Cause: cause,
		Header: map[string]string{wire.NodeStatusHeader: wire.NodeUnknown}}
}

// authorize runs the certificate checks of docs/protocol.md §7 that need no body and
// returns the instance the certificate names.
func (s *Server) authorize(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return "", s.forbidden("no_client_cert", nil)
	}
	leaf := r.TLS.PeerCertificates[0]
	if err := s.verifyChain(r.TLS.PeerCertificates); err != nil {
		return "", s.forbidden("bad_client_cert", err)
	}
	id, err := pki.InstanceID(leaf)
	if err != nil {
		return "", s.forbidden("no_instance_uri", err)
	}
	node, ok := s.cfg.Registry.Live(id)
	if !ok {
		return "", s.unknownNode(nil)
	}
	if pki.SerialHex(leaf.SerialNumber) != node.Serial {
		return "", s.forbidden("superseded_serial", nil)
	}
	src := answer.SourceIP(r)
	inSAN := slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return x509IP(ip) == node.PublicIP })
	if src != node.PublicIP || !inSAN {
		return "", s.forbidden("source_ip", nil)
	}
	return id, nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	id, err := s.authorize(r)
	if err != nil {
		return err
	}
	var hb wire.Heartbeat
	if err := answer.Decode(w, r, &hb); err != nil {
		return err
	}
	if hb.Version != wire.Version {
		return answer.Errorf(http.StatusBadRequest, "bad_request", "unsupported version", nil)
	}
	if hb.InstanceID != id {
		return s.forbidden("body_names_other_instance", nil)
	}
	// Only docs/protocol.md §7's words: a node's free text would reach admin lists and
	// `head status` on the operator's terminal.
	switch hb.Ray.State {
	case wire.RayStarting, wire.RayRunning, wire.RayExited:
	default:
		return answer.Errorf(http.StatusBadRequest, "bad_request", "ray.state must be starting, running or exited", nil)
	}
	action, err := s.cfg.Registry.Heartbeat(hb)
	if err != nil {
		return s.unknownNode(err)
	}
	if hb.HealthToken != "" {
		s.mu.Lock()
		s.tokens[id] = secret.New(hb.HealthToken)
		s.mu.Unlock()
	}
	s.cfg.Metrics.Heartbeat()
	reply := wire.HeartbeatReply{IntervalS: s.IntervalS(), Action: action}
	if s.cfg.RayHead != nil {
		if id, ok := s.cfg.RayHead(); ok {
			reply.RayHead = &wire.RayHeadRun{ID: id}
		}
	}
	if s.cfg.Drain != nil {
		if deadline, ok := s.cfg.Drain(id); ok {
			reply.Drain = &wire.DrainNotice{Deadline: deadline.UTC()}
		}
	}
	if m := s.meshMembers(); m.Version != hb.MeshVersion {
		reply.Mesh = &m
	}
	answer.JSON(w, http.StatusOK, reply)
	return nil
}

func (s *Server) report(w http.ResponseWriter, r *http.Request) error {
	id, err := s.authorize(r)
	if err != nil {
		return err
	}
	var rep wire.Report
	if err := answer.Decode(w, r, &rep); err != nil {
		return err
	}
	if rep.Version != wire.Version {
		return answer.Errorf(http.StatusBadRequest, "bad_request", "unsupported version", nil)
	}
	if rep.InstanceID != id {
		return s.forbidden("body_names_other_instance", nil)
	}
	s.cfg.Metrics.Report()
	s.cfg.Log.Info("node report", "instance", id, "event", rep.Event, "detail", rep.Detail)
	s.cfg.Registry.NoteRayReport(id, rep.Event, rep.Detail)
	if rep.Event == wire.EventRayCrashloop {
		s.endCrashloop(id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// endCrashloop ends a node whose agent gave up on Ray (docs/protocol.md §7): at once,
// not 3 silent intervals later, since the rental is paid by the hour.
func (s *Server) endCrashloop(instanceID string) {
	n, ok := s.cfg.Registry.Node(instanceID)
	if !ok || s.cfg.Destroy == nil {
		return
	}
	s.cfg.Log.Warn("node ray crash loop: ending it", "instance", instanceID, "candidate", n.CandidateID)
	s.cfg.Destroy(n.CandidateID, ReasonCrashloop)
}

// ReasonCrashloop is the candidate's reason once a crash loop ended it.
const ReasonCrashloop = "ray_crashloop"

// HealthToken is the latest health token a node sent.
func (s *Server) HealthToken(instanceID string) (secret.String, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[instanceID]
	return t, ok
}
