package metrics

import (
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// Billing reports whether a candidate's rental still costs money: it has
// a price and an instance, and it has not ended (a destroy_requested one
// bills until the external provider ends it).
func Billing(c wire.Candidate) bool {
	return c.DPHTotal > 0 && c.RentedAt != nil && c.State != wire.StateEnded
}

// Cost is what a candidate's rental has cost in $: its price from
// rented_at until it ended (updated_at) or now.
func Cost(c wire.Candidate, now time.Time) float64 {
	if c.DPHTotal <= 0 || c.RentedAt == nil {
		return 0
	}
	end := now
	if c.State == wire.StateEnded {
		end = c.UpdatedAt
	}
	d := end.Sub(*c.RentedAt)
	if d < 0 {
		return 0
	}
	return c.DPHTotal * d.Hours()
}

// Money is the cluster's spending.
type Money struct {
	ClusterDPH  float64            // $/hour of every billing rental
	NodeTypeDPH map[string]float64 // the same per node type
	Spend       float64            // $ spent so far by every candidate, ended ones too
}

// Spending sums the candidates' prices and costs.
func Spending(cands []wire.Candidate, now time.Time) Money {
	m := Money{NodeTypeDPH: map[string]float64{}}
	for _, c := range cands {
		m.Spend += Cost(c, now)
		if Billing(c) {
			m.ClusterDPH += c.DPHTotal
			m.NodeTypeDPH[c.NodeType] += c.DPHTotal
		}
	}
	return m
}

// LiveDPH is the $/hour the cluster's live rentals cost: what counts
// against max_dph_total.
func LiveDPH(cands []wire.Candidate) float64 { return Spending(cands, time.Time{}).ClusterDPH }
