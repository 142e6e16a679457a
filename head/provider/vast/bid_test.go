package vast

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// bidProvider is a provider on e whose node type "cpu" rents interruptible
// under pol; set changes its settings first.
func (e *env) bidProvider(t *testing.T, pol wire.BidPolicy, set func(*Settings)) *Provider {
	t.Helper()
	st := Settings{Image: "img:1", NodeTypes: map[string]OfferSpec{"cpu": {GPUName: "fake-cpu", Interruptible: &pol}}}
	if set != nil {
		set(&st)
	}
	p, err := New(Config{Client: e.client, Cluster: "b", Log: slog.New(slog.NewTextHandler(e.logs, nil)), Now: e.clock.Now, Settings: st})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func instanceID(t *testing.T, r provider.Rental) int64 {
	t.Helper()
	id, err := strconv.ParseInt(r.InstanceID, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestBidRent: an interruptible type bids min_bid plus its margin on the
// offer with the lowest min_bid, never above max_bid_dph nor what the
// budget leaves; the rental costs its bid (what max_dph_total counts), and
// the provider's status shows the bid beside the bid search's dph_total.
func TestBidRent(t *testing.T) {
	e := newEnv(t, fakevast.DefaultOffers(6), nil) // min_bid 0.04, 0.045, … ; on demand 0.10, 0.11, …
	p := e.bidProvider(t, wire.BidPolicy{MaxBidDPH: 0.045, Margin: 0.1}, nil)
	ctx := context.Background()
	a, err := p.Rent(ctx, rentReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Rent(ctx, rentReq("b"))
	if err != nil {
		t.Fatal(err)
	}
	if !near(a.DPHTotal, 0.044) || !near(b.DPHTotal, 0.045) {
		t.Errorf("bids %g and %g, want 0.044 (0.04 + 10%%) and 0.045 (0.0495 capped at max_bid_dph)", a.DPHTotal, b.DPHTotal)
	}
	if _, err := p.Rent(ctx, rentReq("c")); err == nil {
		t.Error("a third bid rented: every other offer's min_bid is above max_bid_dph")
	}
	e2 := newEnv(t, fakevast.DefaultOffers(6), nil)
	budget := rentReq("d")
	budget.MaxDPH = 0.041 // what max_dph_total leaves
	if r, err := e2.bidProvider(t, wire.BidPolicy{MaxBidDPH: 0.045, Margin: 0.1}, nil).Rent(ctx, budget); err != nil || !near(r.DPHTotal, 0.041) {
		t.Errorf("bid under a budget of 0.041: %g, %v; want 0.041 on the 0.04 offer", r.DPHTotal, err)
	}
	var terms *wire.RentalTerms
	for _, x := range p.Status().Rentals {
		if x.InstanceID == a.InstanceID {
			terms = &x
		}
	}
	if terms == nil || !near(terms.BidDPH, 0.044) || !near(terms.OfferDPH, 0.04) || terms.CandidateID != "a" {
		t.Errorf("status terms of a = %+v, want bid 0.044, the bid search's dph_total 0.04 (at the min bid)", terms)
	}
	for _, in := range e.fake.Live() {
		if in.Bid <= 0 {
			t.Errorf("instance %d rented on demand", in.ID)
		}
	}
}

// TestBidStartsStopped: a bid that vast starts stopped (the machine's
// min_bid rose above it between search and create; here a vast that
// ignores cancel_unavail) is destroyed at once and the next offer rented;
// its machine is not skipped (the next search shows the new min_bid),
// unlike an on-demand stopped start.
func TestBidStartsStopped(t *testing.T) {
	e := newEnvWith(t, fakevast.DefaultOffers(6), nil, func(c *fakevast.Config) { c.IgnoreCancelUnavail = true })
	p := e.bidProvider(t, wire.BidPolicy{MaxBidDPH: 0.5, Margin: 0.1}, nil)
	ctx := context.Background()
	if _, err := p.Rent(ctx, rentReq("a")); err != nil { // the search is cached: 5002 next
		t.Fatal(err)
	}
	e.fake.SetMinBid(5002, 0.3) // another renter bid higher on machine 2002
	r, err := p.Rent(ctx, rentReq("b"))
	if err != nil {
		t.Fatal(err)
	}
	var stopped *fakevast.Instance
	for _, in := range e.fake.AllInstances() {
		if in.Offer.ID == 5002 {
			stopped = &in
		}
	}
	if stopped == nil || !stopped.Stopped || !stopped.Destroyed {
		t.Fatalf("the bid on 5002: %+v, want started stopped and destroyed", stopped)
	}
	if r.HostID != "1003" {
		t.Errorf("b rented on host %s, want 1003 (the next offer)", r.HostID)
	}
	if _, machines := p.excluded(); len(machines) != 0 {
		t.Errorf("machines skipped after a bid's stopped start: %v, want none", machines)
	}
}

// TestOutbidAndContractEnd: the listing marks an outbid (paused) bid
// EndNow outbid, a rental stopped at its contract's end date
// contract_ended, and carries each rental's end date.
func TestOutbidAndContractEnd(t *testing.T) {
	offers := fakevast.DefaultOffers(4)
	end := time.Unix(1_800_000_000, 0).Add(3 * time.Hour)
	offers[1].EndDate = float64(end.Unix())
	e := newEnv(t, offers, nil)
	p := e.bidProvider(t, wire.BidPolicy{MaxBidDPH: 0.5}, func(s *Settings) {
		s.NodeTypes["od"] = OfferSpec{GPUName: "fake-cpu", MaxDPH: 0.5}
	})
	ctx := context.Background()
	bid, err := p.Rent(ctx, rentReq("bid"))
	if err != nil {
		t.Fatal(err)
	}
	od := rentReq("od")
	od.NodeType = "od"
	ends, err := p.Rent(ctx, od)
	if err != nil {
		t.Fatal(err)
	}
	if !ends.EndsAt.Equal(end) {
		t.Errorf("Rent's EndsAt %v, want the offer's end_date %v", ends.EndsAt, end)
	}
	if err := e.fake.Outbid(ctx, instanceID(t, bid)); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(4 * time.Hour) // past the end date: vast stops it
	rs, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]provider.Rental{}
	for _, r := range rs {
		got[r.CandidateID] = r
	}
	if g := got["bid"]; g.EndNow != EndOutbid {
		t.Errorf("outbid rental: EndNow %q, want outbid", g.EndNow)
	}
	if g := got["od"]; g.EndNow != EndContract || !g.EndsAt.Equal(end) {
		t.Errorf("ended contract: EndNow %q EndsAt %v, want contract_ended, %v", g.EndNow, g.EndsAt, end)
	}
}
