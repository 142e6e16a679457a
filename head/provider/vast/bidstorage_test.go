package vast

import (
	"context"
	"testing"

	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// TestBidCostIncludesStorage: vast bills a bid's storage on top of the bid
// for every second the instance exists, so the rental costs bid +
// storage_cost × disk / 720 h: what max_dph_total counts (a budget that
// leaves no room for the storage rents nothing), what List reports, also
// to a restarted head reading vast's dph_total; head status's terms carry
// the bid, the storage and the bid search's dph_total (at the min bid,
// storage included: not an on-demand price).
func TestBidCostIncludesStorage(t *testing.T) {
	ctx := context.Background()
	offers := fakevast.DefaultOffers(1) // min_bid 0.04
	offers[0].StorageCost = 7.2         // $/GB/month: 20 GB cost $0.20/h
	disk := func(s *Settings) {
		s.NodeTypes["cpu"] = OfferSpec{GPUName: "fake-cpu", DiskGB: 20, Interruptible: s.NodeTypes["cpu"].Interruptible}
	}
	pol := wire.BidPolicy{MaxBidDPH: 0.5}

	e := newEnv(t, offers, nil)
	tight := rentReq("tight")
	tight.MaxDPH = 0.2 // what max_dph_total leaves: the bid fits, bid + storage does not
	if r, err := e.bidProvider(t, pol, disk).Rent(ctx, tight); err == nil {
		t.Errorf("rented at $%g/h under a budget of $0.20 (bid 0.04 + storage 0.20)", r.DPHTotal)
	}

	e = newEnv(t, offers, nil)
	p := e.bidProvider(t, pol, disk)
	req := rentReq("a")
	req.MaxDPH = 0.25
	r, err := p.Rent(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.DPHTotal, 0.24) {
		t.Errorf("Rent's DPHTotal %g, want 0.24 (bid 0.04 + storage 0.20)", r.DPHTotal)
	}
	if live := e.fake.Live(); len(live) != 1 || !near(live[0].Bid, 0.04) {
		t.Errorf("vast saw %+v, want one bid of 0.04", live)
	}
	if g := listOne(t, p); !near(g.DPHTotal, 0.24) {
		t.Errorf("List's DPHTotal %g, want 0.24", g.DPHTotal)
	}
	tr := termsOf(p, r.InstanceID)
	if tr == nil || !near(tr.BidDPH, 0.04) || !near(tr.StorageDPH, 0.2) || !near(tr.OfferDPH, 0.24) {
		t.Errorf("terms %+v, want bid 0.04, storage 0.20, offer at min bid 0.24", tr)
	}
	again := e.bidProvider(t, pol, disk) // a restarted head
	if g := listOne(t, again); !near(g.DPHTotal, 0.24) {
		t.Errorf("a restarted head's DPHTotal %g, want 0.24 (vast's dph_total)", g.DPHTotal)
	}
	if tr := termsOf(again, r.InstanceID); tr == nil || !near(tr.BidDPH, 0.04) || !near(tr.StorageDPH, 0.2) {
		t.Errorf("a restarted head's terms %+v, want bid 0.04, storage 0.20", tr)
	}
}
