package vast

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// billingPause is how long a billing refusal stops renting: the owner may
// add credit meanwhile, and one create then tells.
const billingPause = 15 * time.Minute

// halt is why the provider rents nothing now: an answer of vast's that
// every further create or search would get too.
type halt struct {
	mu     sync.Mutex
	reason string    // auth_error, billing, deprecated_endpoint
	detail string    // the error, for head status
	until  time.Time // zero: until the head restarts
}

// note halts renting after an answer that says the account cannot rent:
// a refused key, a billing refusal, a retired endpoint. It logs once per
// halt; true when err was such an answer.
func (p *Provider) note(err error) bool {
	var reason string
	var until time.Time
	switch {
	case errors.Is(err, ErrAuth):
		reason = "auth_error"
	case errors.Is(err, ErrBilling):
		reason, until = "billing", p.cfg.Now().Add(billingPause)
	case errors.Is(err, ErrDeprecated):
		reason = "deprecated_endpoint"
	default:
		return false
	}
	h := &p.halt
	h.mu.Lock()
	fresh := h.reason != reason
	h.reason, h.detail, h.until = reason, err.Error(), until
	h.mu.Unlock()
	if fresh {
		p.log.Error("vast: renting stopped", "reason", reason, "until", untilText(until), "err", err)
	}
	return true
}

// haltBilling halts renting for billingPause with detail (the account
// ran out of money), logged once per halt.
func (p *Provider) haltBilling(detail string) {
	h := &p.halt
	h.mu.Lock()
	fresh := h.reason != "billing"
	until := p.cfg.Now().Add(billingPause)
	h.reason, h.detail, h.until = "billing", detail, until
	h.mu.Unlock()
	if fresh {
		p.log.Error("vast: renting stopped", "reason", "billing", "until", untilText(until), "detail", detail)
	}
}

// halted returns the error every Rent fails with while halted, else nil.
func (p *Provider) halted() error {
	h := &p.halt
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reason == "" {
		return nil
	}
	if !h.until.IsZero() && !p.cfg.Now().Before(h.until) {
		p.log.Info("vast: renting resumes", "after", h.reason)
		h.reason, h.detail = "", ""
		return nil
	}
	return fmt.Errorf("renting stopped (%s, %s): %s", h.reason, untilText(h.until), h.detail)
}

func untilText(t time.Time) string {
	if t.IsZero() {
		return "until the head restarts"
	}
	return "until " + t.UTC().Format(time.RFC3339)
}

// Status implements provider.Statuser: why renting stopped, or the daily
// search quota that holds searches back; Halted "" while renting.
func (p *Provider) Status() wire.ProviderStatus {
	st := wire.ProviderStatus{Kind: wire.ProviderVast, Rentals: p.rentalTerms()}
	if p.halted() != nil {
		h := &p.halt
		h.mu.Lock()
		st.Halted, st.Detail = h.reason, h.detail
		if !h.until.IsZero() {
			u := h.until.UTC()
			st.Until = &u
		}
		h.mu.Unlock()
		return st
	}
	if q := p.cfg.Client.QuotaUntil(); !q.IsZero() {
		u := q.UTC()
		st.Halted, st.Until = "search_quota_exceeded", &u
		st.Detail = "vast's daily search quota is used up: no offer search (so no new rental) until it resets"
	}
	return st
}
