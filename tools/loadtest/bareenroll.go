package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/netip"
	"time"

	"github.com/rayvast/rayvast/internal/answer"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/portcheck"
	"github.com/rayvast/rayvast/internal/wire"
)

// bareEnroll is what an enrollment costs at the least: the request parsed
// and validated, the 64-port HMAC check against the node's source IP with
// internal/portcheck as the head runs it, one ECDSA P-256 node certificate
// issued, and 200. No token, registry, store, gate or pacing: what the head
// spends beyond this is its own overhead.
type bareEnroll struct {
	ca *pki.CA
	// checks caps the port checks at once (--bare-checks), a fixed
	// semaphore where the head adapts. The default, 16, is the cheapest
	// per enrollment of those tried on 2 cores (4, 16, 64, 512): at 512
	// the checks share the CPU so thinly that many time out and are
	// retried, and without a cap a storm of 2,000 would want 32,000
	// sockets.
	checks chan struct{}
}

func newBareEnroll(ca *pki.CA, checks int) *bareEnroll {
	return &bareEnroll{ca: ca, checks: make(chan struct{}, max(1, checks))}
}

func (b *bareEnroll) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req wire.EnrollRequest
	if err := wire.Decode(r.Body, wire.MaxBody, &req); err != nil || req.Validate() != nil {
		http.Error(w, `{"error":"bad_request"}`, http.StatusBadRequest)
		return
	}
	key, _ := base64.StdEncoding.DecodeString(req.PortKey) // Validate checked it
	ip := answer.SourceIP(r)
	b.checks <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := portcheck.Check(ctx, portcheck.CheckConfig{}, ip, req.Ports, key)
	cancel()
	<-b.checks
	if err != nil {
		// 503, so the simulated agent retries as it would a busy head: a
		// check that failed for the machine's load is not the node's fault.
		http.Error(w, `{"error":"port_check"}`, http.StatusServiceUnavailable)
		return
	}
	is, err := b.ca.IssueNode(rand.Reader, pki.NodeRequest{InstanceID: req.InstanceID, PublicIP: netip.MustParseAddr(ip), Now: time.Now()})
	if err != nil {
		http.Error(w, `{"error":"issue"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(wire.EnrollResponse{Version: wire.Version, NodeCert: string(is.CertPEM),
		NodeKey: string(is.KeyPEM.Reveal()), CACert: string(b.ca.CertPEM), CandidateID: "bare", NodeType: "cpu"})
}
