package reconcile

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// TestContractEndReplacedFirst: a node whose vast contract ends within
// ReplaceBefore gets a replacement rented first, even at max_workers (it
// is not ended as scale_down while in flight, nor rented twice); once the
// replacement enrolled the node is ended contract_end and its instance
// destroyed.
func TestContractEndReplacedFirst(t *testing.T) {
	offers := fakevast.DefaultOffers(4)
	offers[0].EndDate = float64(t0.Add(time.Hour).Unix())
	e := newVastEnvWith(t, offers, vast.OfferSpec{MaxDPH: 0.5}, nil)
	fc := e.enrolled(t, "n1")
	l := New(Config{Cluster: fc, Rentals: e.prov, NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 1, MaxWorkers: 1}},
		ReplaceBefore: e.prov.ReplaceBefore(), Now: e.clk.Now})
	ctx := context.Background()
	res, err := l.Tick(ctx)
	if err != nil || res.Created["cpu"] != 1 || len(res.Ended) != 0 {
		t.Fatalf("first tick: created %v ended %v (%v); want one replacement, nothing ended", res.Created, res.Ended, err)
	}
	e.clk.Add(5 * time.Second)
	if res, _ = l.Tick(ctx); res.Created["cpu"] != 0 || len(res.Ended) != 0 {
		t.Fatalf("replacement in flight: created %v ended %v; want neither", res.Created, res.Ended)
	}
	for i := range fc.cands {
		if fc.cands[i].CandidateID == "new1" {
			fc.cands[i].State = wire.StateEnrolled
		}
	}
	e.clk.Add(30 * time.Second) // a sweep: leaks destroyed
	res, err = l.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended["n1"] != ReasonContractEnd || res.Created["cpu"] != 0 {
		t.Errorf("replacement enrolled: ended %v created %v; want n1 %s only", res.Ended, res.Created, ReasonContractEnd)
	}
	if e.live(fc.cands[0].InstanceID) {
		t.Errorf("the ending node's instance %s is still rented", fc.cands[0].InstanceID)
	}
}

// TestContractEndedReplaced: a rental vast stopped at its end date (no
// replacement ahead: ReplaceBefore 0) is ended contract_ended at the next
// sweep and replaced, its host not blocklisted and no failure counted (no
// spare).
func TestContractEndedReplaced(t *testing.T) {
	offers := fakevast.DefaultOffers(4)
	offers[0].EndDate = float64(t0.Add(time.Hour).Unix())
	e := newVastEnvWith(t, offers, vast.OfferSpec{MaxDPH: 0.5}, nil)
	fc := e.enrolled(t, "n1")
	l := New(Config{Cluster: fc, Rentals: e.prov, Blocklist: e.block, NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 1, MaxWorkers: 2}}, Now: e.clk.Now})
	e.clk.Add(time.Hour)
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Ended["n1"] != ReasonContractEnded || res.Created["cpu"] != 1 {
		t.Errorf("ended %v created %v; want n1 %s and one replacement", res.Ended, res.Created, ReasonContractEnded)
	}
	if _, blocked := e.block.Blocked(fc.cands[0].HostID); blocked {
		t.Error("host blocklisted for a contract's end")
	}
}

// TestPriceIncreaseAboveCapReplaced: a host's price increase above
// price_increase_max_dph is rejected and the rental kept until its
// contract's end date (its paid term at the old price), then ended
// price_increase and replaced (no blocklist, no failure); under the cap
// it is accepted and the candidate repriced only from the end date on
// (max_dph_total counts the new price then); with no cap (the default) it
// is rejected and the node kept at its price until its contract ends.
func TestPriceIncreaseAboveCapReplaced(t *testing.T) {
	for _, c := range []struct {
		limit   float64
		answer  string
		ended   string // at the end date
		created int
		dph     float64 // after the end date
	}{
		{0, "rejected", ReasonContractEnded, 1, 0.10},
		{0.25, "accepted", "", 0, 0.2},
		{0.15, "rejected", ReasonPriceIncrease, 1, 0.10},
	} {
		offers := fakevast.DefaultOffers(4)
		end := t0.Add(time.Hour)
		offers[0].EndDate = float64(end.Unix())
		e := newVastEnvWith(t, offers, vast.OfferSpec{MaxDPH: 0.5}, func(s *vast.Settings) { s.PriceIncreaseMaxDPH = c.limit })
		fc := e.enrolled(t, "n1")
		id, _ := strconv.ParseInt(fc.cands[0].InstanceID, 10, 64)
		if _, err := e.fake.RaisePrice(id, fakevast.Rise{GPUDPH: 0.2, AskEnd: float64(end.Add(48 * time.Hour).Unix())}); err != nil {
			t.Fatal(err)
		}
		l := New(Config{Cluster: fc, Rentals: e.prov, Blocklist: e.block, NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 1, MaxWorkers: 2}}, Now: e.clk.Now})
		res, err := l.Tick(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Ended) != 0 || res.Created["cpu"] != 0 || math.Abs(fc.cands[0].DPHTotal-0.10) > 1e-9 {
			t.Errorf("cap %g, before the end date: ended %v created %v, n1 at $%g; want n1 kept at $0.10", c.limit, res.Ended, res.Created, fc.cands[0].DPHTotal)
		}
		if inc := e.fake.Increases(); len(inc) != 1 || inc[0].Answer != c.answer {
			t.Errorf("cap %g: vast saw %+v, want the increase %s", c.limit, inc, c.answer)
		}
		e.clk.Add(time.Hour + 30*time.Second) // past the end date, a sweep due
		if res, err = l.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		if res.Ended["n1"] != c.ended || res.Created["cpu"] != c.created {
			t.Errorf("cap %g, at the end date: ended %v created %v; want n1 %q, %d created", c.limit, res.Ended, res.Created, c.ended, c.created)
		}
		if got := fc.cands[0].DPHTotal; math.Abs(got-c.dph) > 1e-9 {
			t.Errorf("cap %g: n1 costs %g after the end date, want %g", c.limit, got, c.dph)
		}
		if _, blocked := e.block.Blocked(fc.cands[0].HostID); blocked {
			t.Errorf("cap %g: host blocklisted for a price increase", c.limit)
		}
	}
}
