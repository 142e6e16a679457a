package reconcile

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// vastEnv is a vast provider on fakevast (no rate limits, a fake clock).
type vastEnv struct {
	fake  *fakevast.Server
	prov  *vast.Provider
	block *blocklist.List
	clk   *rvtest.Clock
	url   string
}

func newVastEnv(t *testing.T) *vastEnv {
	t.Helper()
	clk := rvtest.NewClock(t0)
	fake := fakevast.New(fakevast.Config{Key: "k", Offers: fakevast.DefaultOffers(12), NoLimits: true, Oversell: true, Now: clk.Now})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	none := vast.Limits{}
	c, err := vast.NewClient(vast.ClientConfig{BaseURL: srv.URL, Key: secret.New("k"), Limits: &none, Now: clk.Now,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	bl := blocklist.New(clk.Now)
	p, err := vast.New(vast.Config{Client: c, Cluster: "c1", Blocklist: bl, Now: clk.Now,
		Settings: vast.Settings{Image: "img:1", NodeTypes: map[string]vast.OfferSpec{"cpu": {MaxDPH: 0.5}}}})
	if err != nil {
		t.Fatal(err)
	}
	return &vastEnv{fake: fake, prov: p, block: bl, clk: clk, url: srv.URL}
}

func (e *vastEnv) rent(t *testing.T, cand string) provider.Rental {
	t.Helper()
	r, err := e.prov.Rent(context.Background(), provider.RentRequest{CandidateID: cand, NodeType: "cpu", Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestVanishedHostsReplaced: a rental vast shows exited, offline or
// unknown after it ran is ended with the status in its reason (what head
// status and head node show), its host blocklisted network, and a
// replacement rented; one vast shows stopped (on demand: never the host,
// vast stops it on purpose) is ended stopped without a blocklist; a container that exited before it enrolled is ended
// without blocklisting its host (the image may be at fault); one still
// renting is left to the enroll timeout.
func TestVanishedHostsReplaced(t *testing.T) {
	e := newVastEnv(t)
	cases := []struct {
		cand, state, status string
		reason              string // "" = not ended
		blocked             bool
	}{
		{"n-exited", wire.StateEnrolled, "exited", "host_vanished (exited)", true},
		{"n-offline", wire.StateEnrolled, "offline", "host_vanished (offline)", true},
		{"n-unknown", wire.StateEnrolled, "unknown", "host_vanished (unknown)", true},
		{"n-stopped", wire.StateEnrolled, "stopped", ReasonStopped, false}, // vast or a user stopped it: not the host
		{"n-lost", wire.StateLost, "offline", "host_vanished (offline)", true},
		{"c-exited", wire.StateRunning, "exited", ReasonInstanceExited, false},
		{"c-offline", wire.StateRunning, "offline", "host_vanished (offline)", true},
		{"c-rented", wire.StateRented, "exited", "", false},
		{"n-fine", wire.StateEnrolled, "", "", false},
	}
	fc := &fakeCluster{}
	hosts := map[string]string{}
	for _, c := range cases {
		r := e.rent(t, c.cand)
		hosts[c.cand] = r.HostID
		x := cand(c.cand, "cpu", c.state, time.Minute, "192.0.2.9")
		x.InstanceID, x.HostID = r.InstanceID, r.HostID
		fc.cands = append(fc.cands, x)
		if c.status != "" {
			id, _ := strconv.ParseInt(r.InstanceID, 10, 64)
			if err := e.fake.Vanish(context.Background(), id, c.status); err != nil {
				t.Fatal(err)
			}
		}
	}
	logs := &rvtest.Buffer{}
	l := New(Config{Cluster: fc, Rentals: e.prov, Blocklist: e.block, NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 4, MaxWorkers: 12}},
		Now: e.clk.Now, Log: slog.New(slog.NewTextHandler(logs, nil))})
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if got := res.Ended[c.cand]; got != c.reason {
			t.Errorf("%s (%s, vast %q): ended %q, want %q", c.cand, c.state, c.status, got, c.reason)
		}
		be, blocked := e.block.Blocked(hosts[c.cand])
		if blocked != c.blocked || blocked && be.Class != wire.BlockNetwork {
			t.Errorf("%s: host %s blocklisted %v (%+v), want %v network", c.cand, hosts[c.cand], blocked, be, c.blocked)
		}
	}
	if res.Created["cpu"] == 0 {
		t.Errorf("created %v, want replacements (2 of 4 enrolled left)", res.Created)
	}
	if !strings.Contains(logs.String(), "host blocklisted") {
		t.Errorf("log does not say why:\n%s", logs.String())
	}
	// The next rental stays off the blocklisted hosts.
	r := e.rent(t, "replacement")
	if _, bad := e.block.Blocked(r.HostID); bad {
		t.Errorf("replacement rented on blocklisted host %s", r.HostID)
	}
}

// TestSharedMachineYields: when vast sold one offer twice (creates
// racing), the rental with the higher instance ID ends as machine_shared
// and is destroyed; the lower one keeps the machine.
func TestSharedMachineYields(t *testing.T) {
	e := newVastEnv(t)
	keep := e.rent(t, "keep")
	none := vast.Limits{}
	c, _ := vast.NewClient(vast.ClientConfig{BaseURL: e.url, Key: secret.New("k"), Limits: &none, Now: e.clk.Now})
	// The same offer, created again by a racing head (vast sold it twice).
	id, err := c.CreateInstance(context.Background(), 5001, vast.CreateRequest{ClientID: "me", Image: "img:1", Disk: 16, Label: vast.LabelPrefix("c1") + "late", Runtype: "args"})
	if err != nil {
		t.Fatal(err)
	}
	k := cand("keep", "cpu", wire.StateEnrolled, time.Minute, "192.0.2.9")
	k.InstanceID, k.HostID = keep.InstanceID, keep.HostID
	late := cand("late", "cpu", wire.StateRented, time.Minute, "")
	late.InstanceID = strconv.FormatInt(id, 10)
	fc := &fakeCluster{cands: []wire.Candidate{k, late}}
	l := New(Config{Cluster: fc, Rentals: e.prov, NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 1, MaxWorkers: 2}}, Now: e.clk.Now})
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended["late"] != ReasonMachineShared || res.Ended["keep"] != "" {
		t.Errorf("ended %v, want only late as %s", res.Ended, ReasonMachineShared)
	}
	for _, in := range e.fake.Live() {
		if in.ID == id {
			t.Errorf("the yielding instance %d is still live", id)
		}
	}
}

// TestHaltedProviderRentsNothing: while the provider says it rents
// nothing (vast's daily search quota), the loop creates no candidate (each
// would fail and count toward the pause), says so once, and resumes after.
func TestHaltedProviderRentsNothing(t *testing.T) {
	st := wire.ProviderStatus{Kind: "vast", Halted: "search_quota_exceeded"}
	logs := &rvtest.Buffer{}
	fc := &fakeCluster{}
	l := New(Config{Cluster: fc, Status: func() wire.ProviderStatus { return st }, NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 2, MaxWorkers: 2}},
		Now: func() time.Time { return t0 }, Log: slog.New(slog.NewTextHandler(logs, nil))})
	for i := 0; i < 2; i++ {
		if res, _ := l.Tick(context.Background()); len(res.Created) != 0 {
			t.Errorf("tick %d created %v while halted", i, res.Created)
		}
	}
	if strings.Count(logs.String(), "renting halted by the provider") != 1 {
		t.Errorf("want the halt logged once:\n%s", logs.String())
	}
	st.Halted = ""
	if res, _ := l.Tick(context.Background()); res.Created["cpu"] != 2 {
		t.Errorf("after the halt: created %v, want 2", res.Created)
	}
}
