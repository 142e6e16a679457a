package vast

import (
	"context"
	"testing"

	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// TestCancelUnavailAnswered410: rayvast's creates ask cancel_unavail, so
// a create that cannot start at once is answered 410 and makes no
// instance (nothing bills storage, nothing to destroy): on demand its
// machine is then skipped (its other offer too) and another rented; a bid
// below the machine's risen min_bid rents the next offer, its machine not
// skipped.
func TestCancelUnavailAnswered410(t *testing.T) {
	ctx := context.Background()
	offers := []fakevast.Offer{off(1, 11, 101, 0.10), off(2, 12, 102, 0.11), off(3, 11, 101, 0.12)}
	offers[0].StartsStopped = true
	e := newEnv(t, offers, nil)
	p := e.provider(t, "c1", nil)
	if r, err := p.Rent(ctx, rentReq("a")); err != nil || r.HostID != "102" {
		t.Fatalf("rent = %+v, %v; want host 102 (offer 1 cannot start)", r, err)
	}
	if n := offersOf(e); n[1] != 0 || len(e.fake.AllInstances()) != 1 {
		t.Errorf("instances %+v, want only offer 2's: the 410 made none", e.fake.AllInstances())
	}
	if _, err := p.Rent(ctx, rentReq("b")); err == nil || offersOf(e)[3] != 0 {
		t.Errorf("second rent: %v, offer 3 created %d times; want none (machine 11 skipped)", err, offersOf(e)[3])
	}

	e = newEnv(t, fakevast.DefaultOffers(6), nil)
	bp := e.bidProvider(t, wire.BidPolicy{MaxBidDPH: 0.5, Margin: 0.1}, nil)
	if _, err := bp.Rent(ctx, rentReq("a")); err != nil { // the search is cached: 5002 next
		t.Fatal(err)
	}
	e.fake.SetMinBid(5002, 0.3)
	r, err := bp.Rent(ctx, rentReq("b"))
	if err != nil || r.HostID != "1003" {
		t.Fatalf("bid rent = %+v, %v; want host 1003 (the next offer)", r, err)
	}
	for _, in := range e.fake.AllInstances() {
		if in.Offer.ID == 5002 {
			t.Errorf("instance %d made on 5002: the bid below min_bid should make none", in.ID)
		}
	}
	if _, machines := bp.excluded(); len(machines) != 0 {
		t.Errorf("machines skipped after a bid's 410: %v, want none", machines)
	}
}
