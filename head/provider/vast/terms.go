package vast

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
)

// Why the provider ends a rental its host is not at fault for
// (provider.Rental.EndNow).
const (
	EndOutbid        = "outbid"         // vast paused an interruptible rental: a higher bid took the machine
	EndContract      = "contract_ended" // stopped at its contract's end date
	EndPriceIncrease = "price_increase" // the host's new price is above price_increase_max_dph
)

// pricesEvery spaces the polls of pending price increases: a host's
// increase applies after the contract's end date, so a minute is ample.
const pricesEvery = time.Minute

// epochTime reads vast's epoch seconds (float); zero for 0.
func epochTime(sec float64) time.Time {
	if sec <= 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(sec*1e9)).UTC()
}

// termsFor returns the terms record of instance id, made on first use;
// the caller holds p.mu.
func (p *Provider) termsFor(id int64, cand string) *wire.RentalTerms {
	t := p.terms[id]
	if t == nil {
		t = &wire.RentalTerms{InstanceID: strconv.FormatInt(id, 10), CandidateID: cand}
		p.terms[id] = t
	}
	return t
}

// rented records a new rental's terms: its bid, its storage's $/hour and
// its offer's dph_total (a bid search's, at the minimum bid), and the
// offer's end date.
func (p *Provider) rented(id int64, cand string, o Offer, bid, storage float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.termsFor(id, cand)
	if bid > 0 {
		t.BidDPH, t.StorageDPH, t.OfferDPH = bid, storage, o.DPHTotal
	}
	if e := epochTime(o.EndDate); !e.IsZero() {
		t.EndDate = &e
	}
}

// applyTerms sets what a listed instance's terms say on its rental: the
// end date, the bid as its price, and EndNow when it stopped at its end
// date, was outbid, or its price rose past the cap.
func (p *Provider) applyTerms(in Instance, r *provider.Rental) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.termsFor(in.ID, r.CandidateID)
	if e := epochTime(in.EndDate); !e.IsZero() {
		t.EndDate, r.EndsAt = &e, e
	}
	if in.IsBid && t.BidDPH == 0 {
		// A restarted head: vast's dph_total of the instance is its total,
		// the storage included.
		t.StorageDPH = StorageDPH(in.StorageCost, in.DiskSpace)
		t.BidDPH = in.DPHTotal - t.StorageDPH
	}
	if t.BidDPH > 0 {
		r.DPHTotal = t.BidDPH + t.StorageDPH // vast bills the storage on top of the bid
	}
	now := p.cfg.Now()
	priceNow(t, r, now)
	stopped := in.Status() == "stopped" || in.Paused()
	e, ending := p.ending[in.ID]
	switch {
	case ending && !now.Before(e.at):
		r.EndNow = e.reason // its term at the old price is used up
	case (stopped || in.CurState == "stopped") && !r.EndsAt.IsZero() && !now.Before(r.EndsAt):
		r.EndNow = EndContract // its contract stopped at its end date, whatever the container shows
	case stopped && (in.IsBid || t.BidDPH > 0):
		// An interruptible instance is paused when outbid (SOURCES.md):
		// read from the contract's states, it ends while still starting
		// and, after it ran (actual_status exited), without blaming the
		// host.
		r.EndNow = EndOutbid
	}
}

// endAt is a rental to end at a time (the zero time: at once).
type endAt struct {
	reason string
	at     time.Time
}

// priceNow sets what an on-demand rental costs now under its accepted
// price increase: the old price until the contract's end date at the
// answer (vast bills the rest of the current term at the original
// price), the new one from then on.
func priceNow(t *wire.RentalTerms, r *provider.Rental, now time.Time) {
	pi := t.PriceIncrease
	if pi == nil || pi.Action != wire.PriceAccepted || t.BidDPH > 0 {
		return
	}
	if pi.AppliesAt != nil && now.Before(*pi.AppliesAt) {
		r.DPHTotal = pi.OldDPH
		return
	}
	r.DPHTotal = max(r.DPHTotal, pi.NewDPH)
}

// dropTerms forgets the terms of instances no longer listed.
func (p *Provider) dropTerms(listed map[int64]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.terms {
		if !listed[id] && !p.list.isYoung(id) {
			delete(p.terms, id)
			delete(p.ending, id)
		}
	}
}

// rentalTerms lists the terms worth showing (head status), by instance.
func (p *Provider) rentalTerms() []wire.RentalTerms {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []wire.RentalTerms
	for _, t := range p.terms {
		if t.BidDPH > 0 || t.EndDate != nil || t.PriceIncrease != nil {
			out = append(out, *t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceID < out[j].InstanceID })
	return out
}

// checkPrices answers the pending price increases of this cluster's
// rentals (at most every pricesEvery): rejected when
// price_increase_max_dph is 0 (the default; the old price holds until the
// end date, where the contract ends), accepted up to it, and above it
// rejected and the rental marked to end (EndPriceIncrease) at its
// contract's end date, so its paid term is used and the loop replaces it
// first (replace_before_end_s); at once when the row names no end date.
// The rise is the rental's: its GPUs and disk (ins) at the row's rates.
func (p *Provider) checkPrices(ctx context.Context, ours map[int64]*provider.Rental, ins map[int64]Instance) {
	now := p.cfg.Now()
	p.mu.Lock()
	due := p.pricesAt.IsZero() || now.Sub(p.pricesAt) >= pricesEvery
	if due {
		p.pricesAt = now
	}
	p.mu.Unlock()
	if !due || len(ours) == 0 {
		return
	}
	rows, err := p.cfg.Client.PendingIncreases(ctx)
	if err != nil {
		p.log.Warn("vast: pending price increases not read; tried again in a minute", "err", err)
		return
	}
	limit := p.cfg.Settings.PriceIncreaseMaxDPH
	for _, row := range rows {
		r := ours[row.ContractID]
		if r == nil {
			continue // another cluster's or gone
		}
		in := ins[row.ContractID]
		pi := &wire.PriceIncrease{OldDPH: r.DPHTotal, NewDPH: r.DPHTotal + row.RiseDPH(in.NumGPUs, in.DiskSpace), Action: wire.PriceRejected, At: now}
		if row.ContractEnd != nil {
			if e := epochTime(*row.ContractEnd); !e.IsZero() {
				pi.AppliesAt = &e
			}
		}
		if limit > 0 {
			pi.Action = wire.PriceEnding
			if pi.NewDPH <= limit+1e-9 {
				pi.Action = wire.PriceAccepted
			}
		}
		err := p.cfg.Client.AnswerIncrease(ctx, row.ID, pi.Action == wire.PriceAccepted)
		if err != nil && !errors.Is(err, ErrNoPending) {
			p.log.Warn("vast: price increase not answered; tried again in a minute", "instance", row.ContractID, "err", err)
			continue
		}
		p.mu.Lock()
		t := p.termsFor(row.ContractID, r.CandidateID)
		t.PriceIncrease = pi
		priceNow(t, r, now)
		if pi.Action == wire.PriceEnding {
			e := endAt{reason: EndPriceIncrease}
			if pi.AppliesAt != nil {
				e.at = *pi.AppliesAt
			}
			p.ending[row.ContractID] = e
			if !now.Before(e.at) {
				r.EndNow = EndPriceIncrease
			}
		}
		p.mu.Unlock()
		p.log.Warn("vast: a host raised its price", "instance", row.ContractID, "candidate", r.CandidateID, "host", row.HostID,
			"old_dph", pi.OldDPH, "new_dph", pi.NewDPH, "action", pi.Action, "applies_at", pi.AppliesAt, "price_increase_max_dph", limit)
	}
}

// DefaultReplaceBefore is how long before a contract's end date its node
// gets a replacement (replace_before_end_s absent): the enroll timeout
// (15 min) several times over, so a failing replacement is retried in time.
const DefaultReplaceBefore = 2 * time.Hour

// SweepEvery asks the reconcile loop to sweep every tick (5 s) when a node
// type rents interruptible: an outbid pause, which still bills storage,
// then ends within one tick. Zero (the loop's default) otherwise.
func (p *Provider) SweepEvery() time.Duration {
	for _, o := range p.cfg.Settings.NodeTypes {
		if o.Interruptible != nil {
			return 5 * time.Second
		}
	}
	return 0
}

// ReplaceBefore is replace_before_end_s, else DefaultReplaceBefore.
func (p *Provider) ReplaceBefore() time.Duration {
	if r := p.cfg.Settings.ReplaceBeforeEndS; r != nil {
		return time.Duration(*r) * time.Second
	}
	return DefaultReplaceBefore
}
