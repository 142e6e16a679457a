package reconcile

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/head/statedir"
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

type listRentals struct {
	mu        sync.Mutex
	live      map[string]bool
	destroyed []string
}

func (l *listRentals) List(context.Context) ([]provider.Rental, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []provider.Rental
	for id := range l.live {
		out = append(out, provider.Rental{InstanceID: id})
	}
	return out, nil
}
func (l *listRentals) Destroy(_ context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.live, id)
	l.destroyed = append(l.destroyed, id)
	return nil
}

type closer struct{ closed bool }

func (c *closer) Close() error { c.closed = true; return nil }

// TestDown: with the head serving its admin API on the socket, Down leaves
// the marker, ends every live candidate (DELETE), destroys every rental
// left and leaves the running head's firewall alone; with no head it still
// destroys rentals and removes the firewall table.
func TestDown(t *testing.T) {
	dir := t.TempDir()
	reg, _, adm := newAdmin(t)
	ln, err := net.Listen("unix", filepath.Join(dir, statedir.AdminSocket))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: adm.Handler()}
	go srv.Serve(ln)
	for i := 0; i < 3; i++ {
		if _, _, err := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu"}); err != nil {
			t.Fatal(err)
		}
	}
	rs := &listRentals{live: map[string]bool{"11": true, "12": true}}
	fw := &closer{}
	rep, err := Down(context.Background(), DownConfig{StateDir: dir, Rentals: rs, Firewall: fw, Poll: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.HeadRunning || len(rep.Ended) != 3 || len(rep.Destroyed) != 2 || fw.closed {
		t.Errorf("report = %+v, firewall closed %v", rep, fw.closed)
	}
	for _, c := range reg.Candidates() {
		if c.State != wire.StateEnded {
			t.Errorf("candidate %s is %s", c.CandidateID, c.State)
		}
	}
	if !exists(DownFile(dir)) {
		t.Error("no down marker")
	}
	srv.Close()

	rs = &listRentals{live: map[string]bool{"13": true}}
	rep, err = Down(context.Background(), DownConfig{StateDir: dir, Rentals: rs, Firewall: fw, Poll: time.Millisecond})
	if err != nil || rep.HeadRunning || len(rep.Destroyed) != 1 || !fw.closed {
		t.Errorf("down without head: %+v, %v, firewall closed %v", rep, err, fw.closed)
	}
	if _, err := Down(context.Background(), DownConfig{StateDir: dir, Poll: time.Millisecond}); err == nil {
		t.Error("down without head and without provider: want an error")
	}
}
