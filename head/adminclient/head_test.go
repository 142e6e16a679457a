package adminclient

import (
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// testHead is the real admin API (head/admin) served on a temporary
// admin.sock, with a client on it: the tests prove the methods against
// the routes as the head serves them, not against a copy of them.
type testHead struct {
	c     *Client
	reg   *registry.Registry
	block *blocklist.List
	m     *metrics.Metrics
	rent  *rentals
}

// rentals is the head's provider driver as the admin API sees it.
type rentals struct {
	reg    *registry.Registry
	mu     sync.Mutex
	ended  []string
	rented int
}

func (r *rentals) Rent(wire.Candidate, map[string]string) { r.mu.Lock(); r.rented++; r.mu.Unlock() }
func (r *rentals) End(id, reason string) (wire.Candidate, error) {
	r.mu.Lock()
	r.ended = append(r.ended, id+":"+reason)
	r.mu.Unlock()
	return r.reg.End(id, reason)
}

func newTestHead(t *testing.T, prov func() wire.ProviderStatus) *testHead {
	t.Helper()
	reg, err := registry.Open(registry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := &testHead{reg: reg, block: blocklist.New(time.Now), m: &metrics.Metrics{}, rent: &rentals{reg: reg}}
	s := admin.New(admin.Config{Registry: reg, Blocklist: h.block, Rentals: h.rent, Metrics: h.m, Provider: prov,
		NodeTypes: map[string]wire.NodeType{"cpu": {MaxWorkers: 8}},
		Env:       admin.Env{Head: "192.0.2.1", PortA: 8443, PortB: 8444, BootstrapSHA256: "aa", CASHA256: "bb"}})
	sock := filepath.Join(t.TempDir(), statedir.AdminSocket)
	ln, err := admin.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.Handler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	h.c = Unix(sock, 5*time.Second)
	return h
}

// enroll makes a running candidate of instance inst at ip a node, as an
// agent's enrollment would (docs/protocol.md §6), without the network.
func (h *testHead) enroll(t *testing.T, inst, ip string) wire.Candidate {
	t.Helper()
	c, tok, err := h.reg.NewCandidate(wire.CandidateRequest{NodeType: "cpu", InstanceID: inst, PublicIP: ip})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := h.reg.Claim(inst, ip, tok, secret.NewBytes([]byte("0123456789abcdef0123456789abcdef")))
	if err != nil {
		t.Fatal(err)
	}
	if !h.reg.TakeSlot(cl, 8) {
		t.Fatal("no enrollment slot")
	}
	if _, err := h.reg.Complete(cl, registry.Enrolled{Serial: "s-" + inst}); err != nil {
		t.Fatal(err)
	}
	return c
}
