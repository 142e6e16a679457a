package rentals

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// fakeProvider rents instances that get a public IP on the second Get.
type fakeProvider struct {
	mu        sync.Mutex
	n         int
	rentals   map[string]*provider.Rental
	gets      map[string]int
	destroyed []string
	host      string
	reqs      []provider.RentRequest
}

func newFake() *fakeProvider {
	return &fakeProvider{rentals: map[string]*provider.Rental{}, gets: map[string]int{}, host: "host-a"}
}

func (f *fakeProvider) Name() string { return "fake" }
func (f *fakeProvider) Rent(ctx context.Context, req provider.RentRequest) (provider.Rental, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	r := &provider.Rental{CandidateID: req.CandidateID, InstanceID: fmt.Sprintf("inst-%d", f.n), HostID: f.host}
	f.rentals[r.InstanceID] = r
	f.reqs = append(f.reqs, req)
	return *r, nil
}
func (f *fakeProvider) Get(ctx context.Context, id string) (provider.Rental, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rentals[id]
	if !ok {
		return provider.Rental{}, provider.ErrGone
	}
	if f.gets[id]++; f.gets[id] >= 2 {
		r.PublicIP, r.Running = "127.0.5.1", true
	}
	return *r, nil
}
func (f *fakeProvider) Destroy(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.rentals, id)
	f.destroyed = append(f.destroyed, id)
	return nil
}
func (f *fakeProvider) List(ctx context.Context) ([]provider.Rental, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []provider.Rental
	for _, r := range f.rentals {
		out = append(out, *r)
	}
	return out, nil
}
func (f *fakeProvider) Close() error { return nil }
func (f *fakeProvider) destroyedList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.destroyed...)
}

func waitState(t *testing.T, reg *registry.Registry, id, want string) wire.Candidate {
	t.Helper()
	var c wire.Candidate
	rvtest.WaitFor(t, 10*time.Second, func() error {
		if c, _ = reg.Candidate(id); c.State != want {
			return fmt.Errorf("candidate %s is %s, want %s", id, c.State, want)
		}
		return nil
	})
	return c
}

func setup(t *testing.T, p provider.Provider) (*Driver, *registry.Registry, *blocklist.List) {
	reg, _ := registry.Open(registry.Config{})
	bl := blocklist.New(time.Now)
	d := New(Config{Provider: p, Registry: reg, Blocklist: bl, NodeTypes: map[string]wire.NodeType{"gpu1": {GPUs: 1}},
		Command: "boot", PollEvery: time.Millisecond})
	t.Cleanup(d.Close)
	return d, reg, bl
}

// TestRentFollowDestroy: a new candidate is rented with its env and the
// bootloader, followed to running, and destroyed through the provider.
func TestRentFollowDestroy(t *testing.T) {
	fp := newFake()
	d, reg, _ := setup(t, fp)
	c, tok, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	d.Rent(c, map[string]string{wire.EnvJoinToken: tok.Reveal()})
	got := waitState(t, reg, c.CandidateID, wire.StateRunning)
	if got.InstanceID != "inst-1" || got.HostID != "host-a" || got.PublicIP != "127.0.5.1" {
		t.Errorf("candidate %+v", got)
	}
	if r := fp.reqs[0]; r.Command != "boot" || r.GPUs != 1 || r.Env[wire.EnvJoinToken] != tok.Reveal() {
		t.Errorf("rent request %+v", r)
	}
	d.Destroy(c.CandidateID, wire.ReasonPortCheck)
	if c, _ := reg.Candidate(c.CandidateID); c.State != wire.StateEnded || c.Reason != wire.ReasonPortCheck {
		t.Errorf("after Destroy: %s %s, want ended", c.State, c.Reason)
	}
	d.Close()
	if got := fp.destroyedList(); len(got) != 1 || got[0] != "inst-1" {
		t.Errorf("provider destroyed %v", got)
	}
}

func TestBlocklistedHostAfterRent(t *testing.T) {
	fp := newFake()
	d, reg, bl := setup(t, fp)
	bl.Add("host-a", wire.BlockNetwork, wire.ReasonEgress)
	c, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	d.Rent(c, nil)
	waitState(t, reg, c.CandidateID, wire.StateEnded)
	d.Close()
	if got := fp.destroyedList(); len(got) != 1 {
		t.Errorf("rental on a blocklisted host not destroyed: %v", got)
	}
}

// TestNoProvider: with an external provider, Destroy only marks the
// candidate destroy_requested.
func TestNoProvider(t *testing.T) {
	d, reg, _ := setup(t, nil)
	c, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: "x"})
	d.Rent(c, nil) // no-op
	d.Destroy(c.CandidateID, wire.ReasonGPUCount)
	if got, _ := reg.Candidate(c.CandidateID); got.State != wire.StateDestroyRequested || got.Reason != wire.ReasonGPUCount {
		t.Errorf("got %s %s, want destroy_requested", got.State, got.Reason)
	}
}

// TestReattach: after a restart, a rental of an ended candidate is
// destroyed, a rented one is followed to running, and a candidate never
// rented is ended.
func TestReattach(t *testing.T) {
	fp := newFake()
	_, reg, _ := setup(t, nil)
	ended, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	live, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	never, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	r1, _ := fp.Rent(context.Background(), provider.RentRequest{CandidateID: ended.CandidateID})
	fp.Rent(context.Background(), provider.RentRequest{CandidateID: live.CandidateID})
	fp.Rent(context.Background(), provider.RentRequest{CandidateID: "c-unknown"})
	reg.End(ended.CandidateID, "deleted")

	d := New(Config{Provider: fp, Registry: reg, Blocklist: blocklist.New(time.Now), PollEvery: time.Millisecond})
	if err := d.Reattach(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, reg, live.CandidateID, wire.StateRunning)
	d.Close()
	if got, _ := reg.Candidate(never.CandidateID); got.State != wire.StateEnded {
		t.Errorf("never-rented candidate is %s, want ended", got.State)
	}
	got := fp.destroyedList()
	if len(got) != 2 || !(got[0] == r1.InstanceID || got[1] == r1.InstanceID) {
		t.Errorf("destroyed %v, want the ended candidate's and the unknown rental", got)
	}
}

// TestReattachDuplicate: two rentals labelled with one rented candidate (a
// create the provider ran twice before the restart): one is recorded and
// followed, the other destroyed, never followed into the candidate.
func TestReattachDuplicate(t *testing.T) {
	fp := newFake()
	_, reg, _ := setup(t, nil)
	c, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	fp.Rent(context.Background(), provider.RentRequest{CandidateID: c.CandidateID})
	fp.Rent(context.Background(), provider.RentRequest{CandidateID: c.CandidateID})

	d := New(Config{Provider: fp, Registry: reg, Blocklist: blocklist.New(time.Now), PollEvery: time.Millisecond})
	if err := d.Reattach(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, reg, c.CandidateID, wire.StateRunning)
	d.Close()
	destroyed := fp.destroyedList()
	if len(destroyed) != 1 || destroyed[0] == got.InstanceID || got.InstanceID == "" {
		t.Errorf("destroyed %v, candidate's instance %q: want the other rental destroyed", destroyed, got.InstanceID)
	}
}

// echoProvider fails every Rent with an error that quotes the request, as
// an API echoing a bad field would.
type echoProvider struct{ fakeProvider }

func (e *echoProvider) Rent(ctx context.Context, req provider.RentRequest) (provider.Rental, error) {
	return provider.Rental{}, fmt.Errorf("create: invalid env %v", req.Env)
}

// TestRentErrorNeverLogsToken: a provider error that echoes the rental's
// env does not put the join token in the head's log.
func TestRentErrorNeverLogsToken(t *testing.T) {
	var logs bytes.Buffer
	reg, _ := registry.Open(registry.Config{})
	d := New(Config{Provider: &echoProvider{*newFake()}, Registry: reg, Blocklist: blocklist.New(time.Now), PollEvery: time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	c, tok, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	d.Rent(c, map[string]string{wire.EnvJoinToken: tok.Reveal()})
	waitState(t, reg, c.CandidateID, wire.StateEnded)
	d.Close()
	if !strings.Contains(logs.String(), "rent failed") {
		t.Fatalf("no rent failure logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), tok.Reveal()) {
		t.Errorf("join token in the log:\n%s", logs.String())
	}
}
