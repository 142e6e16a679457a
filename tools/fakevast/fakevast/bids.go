package fakevast

import (
	"context"
	"encoding/json"
	"fmt"
)

// Interruptible rentals (README: bids). A create with a price bids on the
// offer: below the machine's min_bid the instance starts stopped (200
// success false with new_contract); Outbid pauses a bid as vast does when
// someone bids higher (intended_status, cur_state and next_state
// "stopped": states), the instance kept, billing its storage, until
// destroyed.

// bidOnly keeps the offers that take bids when the search asks type
// "bid", each with its dph_total at the minimum bid: min_bid plus the
// storage of allocated_storage (search_offers.yaml: bid "uses minimum bid
// price"; vast bills storage for every second an instance exists,
// guides/instances/pricing.mdx). An on-demand search answers the offer's
// dph_total as set: the fake reads it as the total at the asked storage.
func bidOnly(offers []Offer, q map[string]json.RawMessage) []Offer {
	var typ string
	if raw, ok := q["type"]; !ok || json.Unmarshal(raw, &typ) != nil || typ != "bid" {
		return offers
	}
	var disk float64
	if raw, ok := q["allocated_storage"]; ok {
		_ = json.Unmarshal(raw, &disk)
	}
	var out []Offer
	for _, o := range offers {
		if o.MinBid > 0 {
			o.DPHTotal = o.MinBid + storageDPH(o, disk)
			out = append(out, o)
		}
	}
	return out
}

// storageDPH is what disk GB cost per hour on o: storage_cost is $/GB per
// 30-day month (vast-cli price_increase.py's _SEC_PER_MONTH; show_instance.yaml's
// example: storage_cost 0.1493 for 10 GB is storage_total_cost 0.00207/h).
func storageDPH(o Offer, disk float64) float64 { return o.StorageCost * disk / (24 * 30) }

// lowBid: a bid below the machine's min_bid starts the instance stopped.
func lowBid(price *float64, o Offer) bool { return price != nil && *price < o.MinBid }

// price is what an instance costs per hour: its bid plus its storage, else
// the offer's dph_total (storage included).
func price(p *float64, o Offer, disk float64) float64 {
	if p != nil {
		return *p + storageDPH(o, disk)
	}
	return o.DPHTotal
}

func bid(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// states are the instance's intended_status, cur_state and next_state
// (show_instance.yaml: the container's intended status, the machine
// contract's current and next scheduled state). A paused bid, outbid or
// started below min_bid, has all three "stopped" whatever actual_status
// says (dstack's vastai compute.py since dstack PR #4037 reads exactly
// that as an interruption, "even during provisioning"); an instance
// stopped at its contract's end has its contract stopped (cur_state,
// next_state) while the renter still means it to run; otherwise all
// three "running".
func (s *Server) states(in *Instance) (intended, cur, next string) {
	switch {
	case in.Outbid || in.Stopped && in.Bid > 0:
		return "stopped", "stopped", "stopped"
	case in.Stopped || in.NoCredit || s.expired(in):
		return "running", "stopped", "stopped"
	}
	return "running", "running", "running"
}

// Outbid makes a higher bid take the machine of interruptible instance
// id: the machine's min_bid rises above the instance's bid and vast pauses
// the instance (intended_status, cur_state, next_state "stopped"; its
// process stops; it bills storage until destroyed). Its actual_status is
// the container's: "exited" once it had run (the container stopped), the
// starting status (null, "loading") while it had not (the case dstack PR
// #4037 detects; issue 42 names the exited one). An on-demand instance
// cannot be outbid.
func (s *Server) Outbid(ctx context.Context, id int64) error {
	s.mu.Lock()
	in, ok := s.instances[id]
	if ok && in.Bid <= 0 {
		s.mu.Unlock()
		return fmt.Errorf("fakevast outbid %d: not an interruptible instance", id)
	}
	if ok {
		in.OutbidStatus = "exited"
		if st, _ := s.status(in).(string); st != "running" {
			in.OutbidStatus = st
		}
		in.Outbid = true
		in.Offer.MinBid = in.Bid * 1.5
		for i := range s.offers {
			if s.offers[i].ID == in.Offer.ID {
				s.offers[i].MinBid = in.Offer.MinBid
			}
		}
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("fakevast outbid %d: no such instance", id)
	}
	s.cfg.Log.Info("fakevast: instance outbid and paused", "instance", id)
	if s.cfg.Backend != nil {
		return s.cfg.Backend.Kill(ctx, id)
	}
	return nil
}

// SetMinBid changes an offer's min_bid (another renter bid on the
// machine): a later bid below it starts stopped.
func (s *Server) SetMinBid(offerID int64, minBid float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.offers {
		if s.offers[i].ID == offerID {
			s.offers[i].MinBid = minBid
		}
	}
}
