package reconcile

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// newVastEnvWith is newVastEnv with the offers and the "cpu" node type's
// offer spec given.
func newVastEnvWith(t *testing.T, offers []fakevast.Offer, spec vast.OfferSpec, set func(*vast.Settings)) *vastEnv {
	t.Helper()
	clk := rvtest.NewClock(t0)
	fake := fakevast.New(fakevast.Config{Key: "k", Offers: offers, NoLimits: true, Now: clk.Now})
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	none := vast.Limits{}
	c, err := vast.NewClient(vast.ClientConfig{BaseURL: srv.URL, Key: secret.New("k"), Limits: &none, Now: clk.Now,
		Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	st := vast.Settings{Image: "img:1", NodeTypes: map[string]vast.OfferSpec{"cpu": spec}}
	if set != nil {
		set(&st)
	}
	bl := blocklist.New(clk.Now)
	p, err := vast.New(vast.Config{Client: c, Cluster: "c1", Blocklist: bl, Now: clk.Now, Settings: st})
	if err != nil {
		t.Fatal(err)
	}
	return &vastEnv{fake: fake, prov: p, block: bl, clk: clk, url: srv.URL}
}

// enrolled rents n nodes of "cpu" and returns them as enrolled candidates.
func (e *vastEnv) enrolled(t *testing.T, ids ...string) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{}
	for _, id := range ids {
		r := e.rent(t, id)
		x := cand(id, "cpu", wire.StateEnrolled, time.Minute, "192.0.2.9")
		x.InstanceID, x.HostID, x.DPHTotal = r.InstanceID, r.HostID, r.DPHTotal
		fc.cands = append(fc.cands, x)
	}
	return fc
}

func (e *vastEnv) live(id string) bool {
	for _, in := range e.fake.Live() {
		if strconv.FormatInt(in.ID, 10) == id {
			return true
		}
	}
	return false
}

// TestOutbidReplacedInOneTick: with an interruptible node type the loop
// sweeps every tick (the provider asks it to), so a bid vast pauses when
// outbid (it bills storage) is ended "outbid", its paused instance
// destroyed and a replacement created on the first tick after the pause
// (even one a little early), its host not blocklisted (an outbid is not
// the host's fault): vast shows a bid outbid after it ran as
// actual_status exited with its contract states stopped, and that exited
// must not read as the host losing it.
func TestOutbidReplacedInOneTick(t *testing.T) {
	e := newVastEnvWith(t, fakevast.DefaultOffers(6), vast.OfferSpec{Interruptible: &wire.BidPolicy{MaxBidDPH: 0.2, Margin: 0.1}}, nil)
	fc := e.enrolled(t, "n1", "n2")
	every := 5 * time.Second
	l := New(Config{Cluster: fc, Rentals: e.prov, Blocklist: e.block, NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 2, MaxWorkers: 4}},
		Every: every, SweepEvery: e.prov.SweepEvery(), Now: e.clk.Now, Log: slog.New(slog.NewTextHandler(&rvtest.Buffer{}, nil))})
	if res, err := l.Tick(context.Background()); err != nil || len(res.Ended) != 0 {
		t.Fatalf("first tick: %v, %v", res.Ended, err)
	}
	n1 := fc.cands[0]
	id, _ := strconv.ParseInt(n1.InstanceID, 10, 64)
	if err := e.fake.Outbid(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(every - 100*time.Millisecond) // the next tick, a little early (a ticker jitters)
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended["n1"] != ReasonOutbid || res.Ended["n2"] != "" {
		t.Errorf("ended %v, want n1 outbid only", res.Ended)
	}
	if res.Created["cpu"] < 1 { // and a spare: an outbid counts as a failure
		t.Errorf("created %v, want a replacement", res.Created)
	}
	if e.live(n1.InstanceID) {
		t.Errorf("the paused instance %s is still rented (it bills storage)", n1.InstanceID)
	}
	if _, blocked := e.block.Blocked(n1.HostID); blocked {
		t.Errorf("host %s blocklisted for an outbid", n1.HostID)
	}
	// The replacement's rental is a bid within the cap.
	r := e.rent(t, "new1")
	if !(r.DPHTotal > 0 && r.DPHTotal <= 0.2) {
		t.Errorf("replacement costs %g, want a bid ≤ 0.2", r.DPHTotal)
	}
}

// TestStoppedBidStartRentsAnother: a bid that cannot start (the min_bid
// rose between search and create) is answered 410 (rayvast asks
// cancel_unavail), so no instance is made, and another offer is rented for
// the same candidate, in the one Rent the driver makes.
func TestStoppedBidStartRentsAnother(t *testing.T) {
	e := newVastEnvWith(t, fakevast.DefaultOffers(6), vast.OfferSpec{Interruptible: &wire.BidPolicy{MaxBidDPH: 0.2}}, nil)
	e.rent(t, "a") // caches the search; 5002 is next
	e.fake.SetMinBid(5002, 0.19)
	r := e.rent(t, "b")
	for _, in := range e.fake.AllInstances() {
		if in.Offer.ID == 5002 {
			t.Errorf("instance %d made on 5002 (stopped %v): the bid below min_bid should make none", in.ID, in.Stopped)
		}
	}
	if !e.live(r.InstanceID) || r.HostID == "1002" {
		t.Errorf("b rented %s on host %s, want a live rental on another host", r.InstanceID, r.HostID)
	}
}
