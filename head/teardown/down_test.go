package teardown

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

// ends is the head's provider driver as the admin API sees it: rents
// nothing, ends in the registry.
type ends struct{ reg *registry.Registry }

func (ends) Rent(wire.Candidate, map[string]string)          {}
func (e ends) End(id, reason string) (wire.Candidate, error) { return e.reg.End(id, reason) }

// newAdmin is a real admin API over an in-memory registry.
func newAdmin(t *testing.T) (*registry.Registry, *admin.Server) {
	t.Helper()
	reg, err := registry.Open(registry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 2}}
	h := admin.New(admin.Config{Registry: reg, Blocklist: blocklist.New(time.Now), Rentals: ends{reg}, NodeTypes: types,
		Env: admin.Env{Head: "192.0.2.1", PortA: 1, PortB: 2, BootstrapSHA256: "aa", CASHA256: "bb"}})
	return reg, h
}

// serveAdmin serves h on dir's admin socket, opened as a running head opens it.
func serveAdmin(t *testing.T, dir string, h http.Handler) *http.Server {
	t.Helper()
	ln, err := admin.Listen(filepath.Join(dir, statedir.AdminSocket))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return srv
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
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
	reg, adm := newAdmin(t)
	srv := serveAdmin(t, dir, adm.Handler())
	for i := 0; i < 3; i++ {
		if _, _, err := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu"}); err != nil {
			t.Fatal(err)
		}
	}
	rs := &listRentals{live: map[string]bool{"11": true, "12": true}}
	fw := &closer{}
	rep, err := Down(context.Background(), Config{StateDir: dir, Rentals: rs, Firewall: fw, Poll: time.Millisecond})
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
	if !exists(reconcile.DownFile(dir)) {
		t.Error("no down marker")
	}
	srv.Close()

	rs = &listRentals{live: map[string]bool{"13": true}}
	rep, err = Down(context.Background(), Config{StateDir: dir, Rentals: rs, Firewall: fw, Poll: time.Millisecond})
	if err != nil || rep.HeadRunning || len(rep.Destroyed) != 1 || !fw.closed {
		t.Errorf("down without head: %+v, %v, firewall closed %v", rep, err, fw.closed)
	}
	if _, err := Down(context.Background(), Config{StateDir: dir, Poll: time.Millisecond}); err == nil {
		t.Error("down without head and without provider: want an error")
	}
}
