package reconcile

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/wire"
)

// recRentals is the head's provider driver as the admin API sees it.
type recRentals struct {
	reg    *registry.Registry
	mu     sync.Mutex
	rented []string
	env    []map[string]string
}

func (r *recRentals) Rent(c wire.Candidate, env map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rented = append(r.rented, c.CandidateID)
	r.env = append(r.env, env)
}
func (r *recRentals) End(id, reason string) (wire.Candidate, error) { return r.reg.End(id, reason) }

func newAdmin(t *testing.T) (*registry.Registry, *recRentals, *admin.Server) {
	t.Helper()
	reg, err := registry.Open(registry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rr := &recRentals{reg: reg}
	types := map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 2}}
	h := admin.New(admin.Config{Registry: reg, Blocklist: blocklist.New(time.Now), Rentals: rr, NodeTypes: types,
		Env: admin.Env{Head: "192.0.2.1", PortA: 1, PortB: 2, BootstrapSHA256: "aa", CASHA256: "bb"}})
	return reg, rr, h
}

// TestAdminPath: the loop creates candidates through the real admin API's
// methods, the code its handlers run (so the head's provider driver is asked to rent them, with the
// docs/protocol.md §2 env) and ends them with the reason recorded.
func TestAdminPath(t *testing.T) {
	reg, rr, adm := newAdmin(t)
	a := InProcess(adm)
	l := New(Config{Cluster: a, NodeTypes: map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 2}}})
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Created["gpu"] != 2 || len(rr.rented) != 2 || len(reg.Candidates()) != 2 {
		t.Fatalf("created %v, rented %v, registry %d", res.Created, rr.rented, len(reg.Candidates()))
	}
	if rr.env[0][wire.EnvJoinToken] == "" || rr.env[0][wire.EnvHead] != "192.0.2.1" {
		t.Errorf("rental env = %v", rr.env[0])
	}
	if res, _ = l.Tick(context.Background()); len(res.Created) != 0 {
		t.Errorf("second tick created %v", res.Created)
	}
	id := reg.Candidates()[0].CandidateID
	if err := a.End(context.Background(), id, ReasonEnrollTimeout); err != nil {
		t.Fatal(err)
	}
	if c, _ := reg.Candidate(id); c.State != wire.StateEnded || c.Reason != ReasonEnrollTimeout {
		t.Errorf("ended candidate = %+v", c)
	}
}
