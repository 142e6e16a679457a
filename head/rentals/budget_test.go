package rentals

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/wire"
)

// pricedProvider rents at the price asked for, or at price when the cap
// allows it (a provider whose offers all cost price), ignoring the cap
// when greedy.
type pricedProvider struct {
	*fakeProvider
	price  float64
	greedy bool
}

func (p *pricedProvider) Rent(ctx context.Context, req provider.RentRequest) (provider.Rental, error) {
	if !p.greedy && req.MaxDPH > 0 && p.price > req.MaxDPH {
		return provider.Rental{}, fmt.Errorf("no offer at ≤ $%.3f/h", req.MaxDPH)
	}
	r, err := p.fakeProvider.Rent(ctx, req)
	r.DPHTotal = p.price
	return r, err
}

func budgetSetup(t *testing.T, p provider.Provider, max float64) (*Driver, *registry.Registry) {
	reg, _ := registry.Open(registry.Config{})
	d := New(Config{Provider: p, Registry: reg, Blocklist: blocklist.New(time.Now), NodeTypes: map[string]wire.NodeType{"gpu1": {GPUs: 1}},
		Command: "boot", PollEvery: time.Millisecond, MaxDPHTotal: max})
	t.Cleanup(d.Close)
	return d, reg
}

// TestBudgetNeverExceeded: ten candidates at once under max_dph_total 1.0
// with rentals at $0.30/h: three are rented (their price recorded), the
// rest end over_budget or find no offer under what is left; the live
// rentals never cost more than the cap.
func TestBudgetNeverExceeded(t *testing.T) {
	fp := &pricedProvider{fakeProvider: newFake(), price: 0.30}
	d, reg := budgetSetup(t, fp, 1.0)
	var ids []string
	for i := 0; i < 10; i++ {
		c, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
		ids = append(ids, c.CandidateID)
		d.Rent(c, nil)
	}
	for _, id := range ids {
		waitSettled(t, reg, id)
	}
	live := metrics.LiveDPH(reg.Candidates())
	rented := 0
	for _, c := range reg.Candidates() {
		if c.State != wire.StateEnded {
			rented++
			if c.DPHTotal != 0.30 || c.RentedAt == nil {
				t.Errorf("rented candidate %s: dph_total %v rented_at %v, want 0.30 recorded", c.CandidateID, c.DPHTotal, c.RentedAt)
			}
		}
	}
	if rented != 3 || live > 1.0 {
		t.Errorf("%d rented at $%.2f/h live, want 3 within $1.00/h", rented, live)
	}
}

// TestBudgetGreedyProvider: a rental that comes back above what the
// budget left is destroyed at once.
func TestBudgetGreedyProvider(t *testing.T) {
	fp := &pricedProvider{fakeProvider: newFake(), price: 2.0, greedy: true}
	d, reg := budgetSetup(t, fp, 1.0)
	c, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	d.Rent(c, nil)
	got := waitState(t, reg, c.CandidateID, wire.StateEnded)
	d.Close()
	if got.Reason != ReasonOverBudget || len(fp.destroyedList()) != 1 {
		t.Errorf("candidate %s (%s), destroyed %v; want over_budget and destroyed", got.State, got.Reason, fp.destroyedList())
	}
}

// waitSettled waits until a candidate is running or ended.
func waitSettled(t *testing.T, reg *registry.Registry, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if c, _ := reg.Candidate(id); c.State == wire.StateRunning || c.State == wire.StateEnded {
			return
		}
	}
	t.Fatalf("candidate %s never settled", id)
}
