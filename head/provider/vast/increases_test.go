package vast

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// priceProvider is a provider on e renting node type "cpu" (and "gpu":
// 4 GPUs, 20 GB of disk) with price_increase_max_dph limit.
func (e *env) priceProvider(t *testing.T, limit float64) *Provider {
	t.Helper()
	p, err := New(Config{Client: e.client, Cluster: "p", Now: e.clock.Now, Log: slog.New(slog.NewTextHandler(e.logs, nil)),
		Settings: Settings{Image: "img:1", PriceIncreaseMaxDPH: limit, NodeTypes: map[string]OfferSpec{
			"cpu": {MaxDPH: 0.5}, "gpu": {GPUName: "fake-gpu", MaxDPH: 1, DiskGB: 20}}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// listOne lists p's rentals and returns the only one.
func listOne(t *testing.T, p *Provider) provider.Rental {
	t.Helper()
	rs, err := p.List(context.Background())
	if err != nil || len(rs) != 1 {
		t.Fatalf("List = %v, %v; want one rental", rs, err)
	}
	return rs[0]
}

func termsOf(p *Provider, instance string) *wire.RentalTerms {
	for _, x := range p.Status().Rentals {
		if x.InstanceID == instance {
			return &x
		}
	}
	return nil
}

// TestPriceRiseCountsEveryGPUAndGB: a rise is read as vast's CLI shows
// its rates, the GPU's per GPU-hour and the disk's per GB: on 4 GPUs and
// 20 GB a rise from $0.10 to $0.15 per GPU-hour and from $3.60 to $7.20
// per GB-month adds $0.30/h ($0.50 → $0.80), so a cap of $0.70 rejects it
// (reading the rates once each would say $0.555 and accept) and one of
// $0.85 accepts it.
func TestPriceRiseCountsEveryGPUAndGB(t *testing.T) {
	for _, c := range []struct {
		limit          float64
		action, answer string
	}{
		{0.7, wire.PriceEnding, "rejected"},
		{0.85, wire.PriceAccepted, "accepted"},
	} {
		offers := []fakevast.Offer{{ID: 5001, MachineID: 2001, HostID: 1001, GPUName: "fake-gpu", NumGPUs: 4, DPHTotal: 0.5,
			StorageCost: 3.6, Verified: true, Rentable: true, DirectPortCount: 100}} // disk: 3.6 × 20 / 720 = $0.10/h; GPUs $0.10 each
		e := newEnv(t, offers, nil)
		p := e.priceProvider(t, c.limit)
		req := rentReq("a")
		req.NodeType, req.GPUs = "gpu", 4
		r, err := p.Rent(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fake.RaisePrice(instanceID(t, r), fakevast.Rise{GPUDPH: 0.15, DiskGBMonth: 7.2}); err != nil {
			t.Fatal(err)
		}
		listOne(t, p)
		tr := termsOf(p, r.InstanceID)
		if tr == nil || tr.PriceIncrease == nil || !near(tr.PriceIncrease.OldDPH, 0.5) || !near(tr.PriceIncrease.NewDPH, 0.8) || tr.PriceIncrease.Action != c.action {
			t.Errorf("cap %g: terms %+v, want $0.50 → $0.80 %s", c.limit, tr, c.action)
		}
		if inc := e.fake.Increases(); len(inc) != 1 || inc[0].Answer != c.answer {
			t.Errorf("cap %g: vast saw %+v, want the increase %s", c.limit, inc, c.answer)
		}
	}
}

// TestPriceRiseAppliesAfterEndDate: a price increase takes effect at the
// contract's current end date, as vast bills it: accepted, the rental
// costs its old price until then and the new one after (vast extended
// the contract, so it keeps running); over the cap, it is rejected and
// the rental ends price_increase only once its paid term is used (its
// EndsAt lets the loop replace it first). With no end date known the
// rental over the cap ends at once.
func TestPriceRiseAppliesAfterEndDate(t *testing.T) {
	ctx := context.Background()
	start := time.Unix(1_800_000_000, 0)
	end := start.Add(3 * time.Hour)
	offers := func(withEnd bool) []fakevast.Offer {
		o := fakevast.DefaultOffers(2)
		if withEnd {
			o[0].EndDate = float64(end.Unix())
		}
		return o
	}
	rise := fakevast.Rise{GPUDPH: 0.2, AskEnd: float64(end.Add(24 * time.Hour).Unix())}

	t.Run("accepted", func(t *testing.T) {
		e := newEnv(t, offers(true), nil)
		p := e.priceProvider(t, 0.25)
		r, err := p.Rent(ctx, rentReq("a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fake.RaisePrice(instanceID(t, r), rise); err != nil {
			t.Fatal(err)
		}
		if g := listOne(t, p); !near(g.DPHTotal, 0.10) || g.EndNow != "" {
			t.Errorf("before the end date: $%g EndNow %q, want the old $0.10, kept", g.DPHTotal, g.EndNow)
		}
		if tr := termsOf(p, r.InstanceID); tr == nil || tr.PriceIncrease == nil || tr.PriceIncrease.AppliesAt == nil || !tr.PriceIncrease.AppliesAt.Equal(end) {
			t.Errorf("terms %+v, want the increase applying at %v", tr, end)
		}
		e.clock.Add(3*time.Hour + time.Minute)
		g := listOne(t, p)
		if !near(g.DPHTotal, 0.2) || g.EndNow != "" || g.Vanished != "" {
			t.Errorf("after the end date: $%g EndNow %q Vanished %q, want $0.20, running (extended)", g.DPHTotal, g.EndNow, g.Vanished)
		}
		if in, err := e.client.ShowInstance(ctx, instanceID(t, r)); err != nil || !near(in.DPHTotal, 0.2) {
			t.Errorf("vast shows $%g (%v), want $0.20 after the end date", in.DPHTotal, err)
		}
	})

	t.Run("over the cap", func(t *testing.T) {
		e := newEnv(t, offers(true), nil)
		p := e.priceProvider(t, 0.15)
		r, err := p.Rent(ctx, rentReq("a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fake.RaisePrice(instanceID(t, r), rise); err != nil {
			t.Fatal(err)
		}
		if g := listOne(t, p); g.EndNow != "" || !g.EndsAt.Equal(end) || !near(g.DPHTotal, 0.10) {
			t.Errorf("before the end date: EndNow %q EndsAt %v $%g, want kept until %v at $0.10", g.EndNow, g.EndsAt, g.DPHTotal, end)
		}
		if inc := e.fake.Increases(); len(inc) != 1 || inc[0].Answer != "rejected" {
			t.Errorf("vast saw %+v, want the increase rejected", inc)
		}
		e.clock.Add(3*time.Hour - time.Minute)
		if g := listOne(t, p); g.EndNow != "" {
			t.Errorf("a minute before the end date: EndNow %q, want none", g.EndNow)
		}
		e.clock.Add(time.Minute)
		if g := listOne(t, p); g.EndNow != EndPriceIncrease {
			t.Errorf("at the end date: EndNow %q, want %s", g.EndNow, EndPriceIncrease)
		}
	})

	t.Run("over the cap, no end date", func(t *testing.T) {
		e := newEnv(t, offers(false), nil)
		p := e.priceProvider(t, 0.15)
		r, err := p.Rent(ctx, rentReq("a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fake.RaisePrice(instanceID(t, r), rise); err != nil {
			t.Fatal(err)
		}
		if g := listOne(t, p); g.EndNow != EndPriceIncrease {
			t.Errorf("EndNow %q, want %s at once", g.EndNow, EndPriceIncrease)
		}
		if g := listOne(t, p); g.EndNow != EndPriceIncrease {
			t.Errorf("the next listing forgot the rental must end: %q", g.EndNow)
		}
	})

	t.Run("default rejects", func(t *testing.T) {
		e := newEnv(t, offers(true), nil)
		p := e.priceProvider(t, 0)
		r, err := p.Rent(ctx, rentReq("a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fake.RaisePrice(instanceID(t, r), rise); err != nil {
			t.Fatal(err)
		}
		if g := listOne(t, p); g.EndNow != "" || !near(g.DPHTotal, 0.10) {
			t.Errorf("EndNow %q $%g, want kept at $0.10", g.EndNow, g.DPHTotal)
		}
		if inc := e.fake.Increases(); len(inc) != 1 || inc[0].Answer != "rejected" {
			t.Errorf("vast saw %+v, want the increase rejected", inc)
		}
		if tr := termsOf(p, r.InstanceID); tr == nil || tr.PriceIncrease == nil || tr.PriceIncrease.Action != wire.PriceRejected {
			t.Errorf("terms %+v, want the increase rejected", tr)
		}
		e.clock.Add(3 * time.Hour)
		if g := listOne(t, p); g.EndNow != EndContract {
			t.Errorf("at the end date: EndNow %q, want %s (vast stopped it)", g.EndNow, EndContract)
		}
	})
}

// TestPriceCallsPaced: the price-increase endpoints allow one call per 2 s
// (vast's generated specs; fakevast enforces it): two rises answered in
// one sweep, the list and both rejections, draw no 429.
func TestPriceCallsPaced(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakevast.DefaultOffers(2), nil) // vast's limits, scaled, on both sides
	p := e.priceProvider(t, 0)
	for _, c := range []string{"a", "b"} {
		r, err := p.Rent(ctx, rentReq(c))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fake.RaisePrice(instanceID(t, r), fakevast.Rise{GPUDPH: 0.3}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.List(ctx); err != nil {
		t.Fatal(err)
	}
	for _, inc := range e.fake.Increases() {
		if inc.Answer != "rejected" {
			t.Errorf("increase %d: %q, want rejected", inc.ID, inc.Answer)
		}
	}
	if calls, limited := e.fake.Stats(); limited != 0 {
		t.Errorf("%d requests refused 429 (calls %v), want none", limited, calls)
	}
}
