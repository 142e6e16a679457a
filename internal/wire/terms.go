package wire

import (
	"fmt"
	"time"
)

// BidPolicy makes a vast node type rent interruptible (a bid): each rental
// bids the offer's min_bid plus Margin (a fraction: 0.1 = 10 % over), at
// most MaxBidDPH. An offer whose min_bid is above the cap is not rented. An
// outbid rental is paused by vast; the head ends and replaces it.
type BidPolicy struct {
	MaxBidDPH float64 `json:"max_bid_dph"`      // $/hour, required (> 0)
	Margin    float64 `json:"margin,omitempty"` // 0-1, default 0
}

// Check says what is wrong with the policy, if anything.
func (b BidPolicy) Check() error {
	switch {
	case !(b.MaxBidDPH > 0 && b.MaxBidDPH < 1000): // NaN fails
		return fmt.Errorf("interruptible.max_bid_dph: %g, want a $/hour above 0 (the highest bid)", b.MaxBidDPH)
	case !(b.Margin >= 0 && b.Margin <= 1):
		return fmt.Errorf("interruptible.margin: %g, want 0-1 (the fraction bid over the offer's min_bid)", b.Margin)
	}
	return nil
}

// Bid is what a rental bids on an offer whose min_bid is minBid under a
// cap (the policy's, or less: what max_dph_total leaves); ok false when
// even min_bid is above the cap.
func (b BidPolicy) Bid(minBid, cap float64) (bid float64, ok bool) {
	if cap <= 0 || cap > b.MaxBidDPH {
		cap = b.MaxBidDPH
	}
	if minBid > cap {
		return 0, false
	}
	return min(minBid*(1+b.Margin), cap), true
}

// RentalTerms are a vast rental's terms as the provider knows them (head
// status): when it rents interruptible its bid, its storage's $/hour
// (billed on top of the bid for every second the instance exists) and its
// offer's dph_total at rental (a bid search's: at the minimum bid, storage
// included), its contract's end date, a pending price increase.
type RentalTerms struct {
	InstanceID  string     `json:"instance_id"`
	CandidateID string     `json:"candidate_id,omitempty"`
	BidDPH      float64    `json:"bid_dph,omitempty"`
	StorageDPH  float64    `json:"storage_dph,omitempty"`
	OfferDPH    float64    `json:"offer_dph,omitempty"`
	EndDate     *time.Time `json:"end_date,omitempty"`
	// PriceIncrease is the host's last pending price increase and what the
	// head did with it.
	PriceIncrease *PriceIncrease `json:"price_increase,omitempty"`
}

// What the head did with a pending price increase.
const (
	PriceRejected = "rejected" // the default: the old price holds until the end date
	PriceAccepted = "accepted" // under price_increase_max_dph
	PriceEnding   = "ending"   // above price_increase_max_dph: rejected, the rental replaced by its end date
)

// PriceIncrease is one pending price increase of a host (vast's
// pending-price-increases row, as $/hour of the whole rental). AppliesAt
// is the contract's end date when the head answered: an accepted price is
// charged only from then on, and a rental ending over the cap ends then
// (absent: no end date known, at once).
type PriceIncrease struct {
	OldDPH    float64    `json:"old_dph"`
	NewDPH    float64    `json:"new_dph"`
	Action    string     `json:"action"`
	At        time.Time  `json:"at"`
	AppliesAt *time.Time `json:"applies_at,omitempty"`
}
