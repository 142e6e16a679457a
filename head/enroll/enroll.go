// Package enroll serves port A (docs/protocol.md §4, §6): the agent binary, the CA
// certificate, and POST /enroll with its decision order, step by step.
package enroll

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/ratelimit"
	"github.com/rayvast/rayvast/head/rayversion"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/answer"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// CheckTimeout bounds the whole port check (docs/protocol.md §6 step 7: within 10 s).
const CheckTimeout = 10 * time.Second

// PortChecker dials every port and checks the HMAC answers (step 7). It
// bounds its own time (within CheckTimeout once the check starts). An error
// wrapping ErrBusy means the check never started: the head had no turn for
// it in time, which says nothing about the candidate.
type PortChecker func(ctx context.Context, ip string, ports []int, portKey []byte) error

// ErrBusy is a port check that waited too long for its turn.
var ErrBusy = errors.New("port check not started: the head is busy")

// reasonBusy is judge's verdict for ErrBusy: neither a pass nor a rejection.
const reasonBusy = "busy"

// Bundle is the part of the enroll answer that is the same for every node.
type Bundle struct {
	ClusterToken   secret.String
	AppID          string
	AppRootKey     secret.Bytes
	Shim           *wire.Shim
	RayHeadAddress string
	GuestAPI       wire.GuestAPIPolicy
	PortB          int
	IntervalS      int
	UnheardLimitS  int    // 0: the node never ends itself
	SelfEnd        string // how the node ends itself: "vast" when the head rents on vast (wire.HeartbeatParams)
}

// Config builds a Server.
type Config struct {
	Registry  *registry.Registry
	Blocklist *blocklist.List
	Limiter   *ratelimit.Limiter
	PortCheck PortChecker
	CA        *pki.CA
	NodeTypes map[string]wire.NodeType
	Bundle    Bundle
	Agent     []byte // served at /bootstrap
	// Destroy ends a candidate whose token was proven but that failed a
	// check: through the built-in provider, or as destroy_requested.
	Destroy func(candidateID, reason string)
	Metrics *metrics.Metrics
	Log     *slog.Logger
	Now     func() time.Time
	Rand    io.Reader
	// Ray names the versions every node must run (step 6a); empty
	// fields leave only the 2.52 floor.
	Ray wire.RayHead
}

// Server is the port A handler.
type Server struct {
	cfg Config
	ips ipHolds // step 7a: public IPs of enrollments past the check
}

// New returns a Server; cfg.Metrics, Log, Now and Rand default when nil.
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
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	return &Server{cfg: cfg}
}

// Handler routes port A: unknown paths 404, other methods on known paths 405.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /bootstrap", s.bootstrap)
	mux.HandleFunc("GET /ca.pem", s.caPEM)
	mux.Handle("POST /enroll", answer.Func(s.cfg.Log, s.enroll))
	return answer.CleanPathsOnly(mux)
}

func (s *Server) bootstrap(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(s.cfg.Agent)))
	_, _ = w.Write(s.cfg.Agent)
	s.cfg.Metrics.AgentDownload()
}

func (s *Server) caPEM(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-pem-file")
	_, _ = w.Write(s.cfg.CA.CertPEM)
}

// refused is the one answer to every refusal before a valid token.
var refused = &answer.Error{Status: http.StatusForbidden, Body: wire.ErrorBody{Error: wire.ErrRefused}}

func (s *Server) enroll(w http.ResponseWriter, r *http.Request) error {
	m := s.cfg.Metrics
	ip := answer.SourceIP(r)

	// Step 1: malformed → 400, nothing destroyed.
	var req wire.EnrollRequest
	if err := answer.Decode(w, r, &req); err != nil {
		m.Enrollment(metrics.OutcomeMalformed)
		return err
	}
	if err := req.Validate(); err != nil {
		m.Enrollment(metrics.OutcomeMalformed)
		return answer.Errorf(http.StatusBadRequest, "bad_request", err.Error(), nil)
	}
	tok := secret.New(req.JoinToken)
	rawKey, _ := base64.StdEncoding.DecodeString(req.PortKey) // Validate checked it
	portKey := secret.NewBytes(rawKey)
	req.JoinToken, req.PortKey = "", ""

	// Steps 2 and 3: refusals, then the token is consumed atomically. Only
	// a refusal is rate-limited: vast hosts share public IPs, so a co-tenant
	// collecting refusals must not lock the real candidate out.
	cl, err := s.cfg.Registry.Claim(req.InstanceID, ip, tok, portKey)
	var re *registry.RefusalError
	if errors.As(err, &re) {
		m.Refusal("enroll", re.Reason)
		if !s.cfg.Limiter.Refuse(ip) {
			m.Enrollment(metrics.OutcomeRateLimited)
			return answer.Errorf(http.StatusTooManyRequests, "rate_limited", "too many refusals from this ip", re)
		}
		m.Enrollment(metrics.OutcomeRefused)
		refusal := *refused
		refusal.Reason, refusal.Cause = re.Reason, fmt.Errorf("instance %q", req.InstanceID)
		return &refusal
	}
	if err != nil {
		m.Enrollment(metrics.OutcomeError)
		return err
	}
	c := cl.Candidate
	log := s.cfg.Log.With("candidate", c.CandidateID, "instance", c.InstanceID, "host", c.HostID)
	if cl.Reissue {
		return s.reissue(w, &req, cl, log)
	}

	// Steps 4–8: the token was good; a failure now destroys the candidate.
	reason, class := s.judge(r.Context(), &req, c, portKey, log)
	if reason == reasonBusy {
		return s.postpone(w, cl)
	}
	if reason == "" { // step 7a, held until the node is recorded or rejected
		var release func()
		if reason, release = s.sharedIP(c, log); reason == "" {
			defer release()
		}
	}
	if reason == "" {
		nt := s.cfg.NodeTypes[c.NodeType]
		if !s.cfg.Registry.TakeSlot(cl, nt.MaxWorkers) {
			reason = wire.ReasonNoSlot
		}
	}
	if reason != "" {
		return s.reject(cl, &req, reason, class, log)
	}

	// Step 9: issue and answer.
	resp, serial, err := s.bundle(&req, c)
	if err != nil {
		s.cfg.Registry.Release(cl)
		s.cfg.Destroy(c.CandidateID, "issue_failed")
		m.Enrollment(metrics.OutcomeError)
		return err
	}
	if _, err := s.cfg.Registry.Complete(cl, registry.Enrolled{Serial: serial, GuestAPIPort: resp.GuestAPI.Port,
		UnheardLimitS: resp.Heartbeat.UnheardLimitS,
		MeshPort:      resp.Mesh.Port, Ports: slices.Sorted(slices.Values(req.Ports))}); err != nil {
		m.Enrollment(metrics.OutcomeError)
		if errors.Is(err, registry.ErrConflict) {
			e := *refused
			e.Reason, e.Cause = "ended_during_enrollment", err
			return &e
		}
		return err
	}
	m.Enrollment(metrics.OutcomeEnrolled)
	log.Info("enrolled", "serial", serial, "node_type", c.NodeType)
	answer.JSON(w, http.StatusOK, resp)
	return nil
}

// judge runs steps 4–7 (6a included) and returns the rejection reason
// and blocklist class, or "" when the candidate passed.
func (s *Server) judge(ctx context.Context, req *wire.EnrollRequest, c wire.Candidate, portKey secret.Bytes, log *slog.Logger) (reason, class string) {
	ch := req.Checks
	if !ch.Sandboxed() {
		log.Warn("host check failed", "failed", ch.Failed(true))
		return wire.ReasonSecurityCheck, wire.BlockSecurity
	}
	nt, ok := s.cfg.NodeTypes[c.NodeType]
	if !ok {
		log.Warn("node type no longer configured", "node_type", c.NodeType)
		return wire.ReasonNoSlot, ""
	}
	if req.GPUs != nt.GPUs {
		log.Warn("gpu count", "got", req.GPUs, "want", nt.GPUs)
		return wire.ReasonGPUCount, wire.BlockSecurity
	}
	if !gpuModelMatches(nt.GPUModel, req.GPUModels, nt.GPUs) {
		log.Warn("gpu model", "got", req.GPUModels, "want", nt.GPUModel)
		return wire.ReasonGPUModel, wire.BlockSecurity
	}
	if !ch.Egress.OK || canon(ch.Egress.IP) != c.PublicIP {
		log.Warn("egress check failed", "ok", ch.Egress.OK, "detail", ch.Egress.Detail, "egress_ip", ch.Egress.IP, "public_ip", c.PublicIP)
		return wire.ReasonEgress, wire.BlockNetwork
	}
	if why := rayversion.Problem(req.RayVersion, req.PythonVersion, s.cfg.Ray.Version, s.cfg.Ray.PythonVersion); why != "" {
		// The image is wrong, not the host: no blocklist, but every rental
		// of this image will fail alike, so say so plainly.
		log.Error("ray version refused: fix the node image (destroyed, host not blocklisted)", "why", why,
			"ray_version", req.RayVersion, "python_version", req.PythonVersion,
			"want_ray_version", s.cfg.Ray.Version, "want_python_version", s.cfg.Ray.PythonVersion)
		return wire.ReasonRayVersion, ""
	}
	// The check runs to its end even if the client goes away: the token is
	// spent either way, and the verdict should be about the ports. Its
	// time is the checker's to bound: a wait for its turn must not count.
	err := s.cfg.PortCheck(context.WithoutCancel(ctx), c.PublicIP, req.Ports, portKey.Reveal())
	if errors.Is(err, ErrBusy) {
		log.Warn("port check postponed: the head is busy", "err", err)
		return reasonBusy, ""
	}
	if err != nil {
		log.Warn("port check failed", "err", err)
		return wire.ReasonPortCheck, wire.BlockNetwork
	}
	return "", ""
}

// postpone answers 503 to an enrollment whose port check found no turn in
// time. The candidate keeps its consumed token and stays resumable, so the
// agent's retry (same token and port_key, docs/protocol.md §6 step 2) starts again at
// step 4; nothing is destroyed or blocklisted.
func (s *Server) postpone(w http.ResponseWriter, cl *registry.Claim) error {
	s.cfg.Registry.Postpone(cl)
	s.cfg.Metrics.Enrollment(metrics.OutcomeBusy)
	w.Header().Set("Retry-After", "5")
	return answer.Errorf(http.StatusServiceUnavailable, wire.ErrBusy, "port checks queued too long; retry with the same request", nil)
}

func (s *Server) reject(cl *registry.Claim, req *wire.EnrollRequest, reason, class string, log *slog.Logger) error {
	c := cl.Candidate
	if err := s.cfg.Registry.Report(cl, reportOf(req)); err != nil {
		log.Warn("could not record what the rejected agent reported", "err", err)
	}
	if class != "" && c.HostID != "" {
		e := s.cfg.Blocklist.Add(c.HostID, class, reason)
		log.Warn("host blocklisted", "class", e.Class, "until", e.Until)
	}
	s.cfg.Registry.Release(cl)
	s.cfg.Destroy(c.CandidateID, reason)
	s.cfg.Metrics.Enrollment(metrics.OutcomeRejected)
	s.cfg.Metrics.Rejection(reason)
	return &answer.Error{Status: http.StatusForbidden, Body: wire.ErrorBody{Error: wire.ErrRejected, Reason: reason},
		Reason: "rejected " + reason, Cause: fmt.Errorf("candidate %s destroyed", c.CandidateID)}
}

// reportOf is what a rejected agent reported, bounded: a hostile host must
// not fill the store.
func reportOf(req *wire.EnrollRequest) wire.CheckReport {
	return wire.CheckReport{Checks: req.Checks, GPUs: req.GPUs, GPUModels: req.GPUModels,
		RayVersion: req.RayVersion, PythonVersion: req.PythonVersion}.Bounded()
}

func canon(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ""
	}
	return a.Unmap().String()
}
