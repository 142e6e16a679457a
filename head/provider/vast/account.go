package vast

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rayvast/rayvast/head/provider"
)

// Why the provider ends an on-demand rental vast stopped (not the host's
// doing: vast never interrupts on-demand; its documented causes are the
// contract's end, a user's stop and a balance at zero).
const (
	EndStopped   = "stopped"    // stopped on purpose (a user's stop, or vast's for a cause it does not name)
	EndNoBalance = "no_balance" // the account ran out of money: vast stops every instance
)

// epUser paces the account reads on their own (show_user.yaml documents
// no limit).
const epUser = "user"

// Account is what rayvast reads of GET /api/v0/users/current (the CLI's
// show user): balance (show_user.yaml: "the current balance") and credit
// (the CLI's table shows it beside balance). Which one is the prepaid
// money vast's billing guide calls the "credit balance" the reference
// does not say, so the account counts as out of money only when neither
// is above zero.
type Account struct {
	Balance *float64 `json:"balance"`
	Credit  *float64 `json:"credit"`
}

// Empty: the account has no money left (a field absent counts for
// nothing; both absent is not empty: nothing is known).
func (a Account) Empty() bool {
	if a.Balance == nil && a.Credit == nil {
		return false
	}
	return (a.Balance == nil || *a.Balance <= 0) && (a.Credit == nil || *a.Credit <= 0)
}

// String names the fields vast gave ("balance $0.00, credit $-1.20").
func (a Account) String() string {
	out := ""
	for _, f := range []struct {
		name string
		v    *float64
	}{{"balance", a.Balance}, {"credit", a.Credit}} {
		if f.v != nil {
			if out != "" {
				out += ", "
			}
			out += fmt.Sprintf("%s $%.2f", f.name, *f.v)
		}
	}
	return out
}

// ShowUser reads the account as the CLI's show user does: GET
// /api/v0/users/current (vast.py show__user and vastai/api/billing.py
// show_user ask the path without the trailing slash the API reference
// gives; both are served). Its api_key is never decoded.
func (c *Client) ShowUser(ctx context.Context) (Account, error) {
	var a Account
	err := c.do(ctx, call{op: "show user", ep: epUser, method: http.MethodGet, path: "/api/v0/users/current", out: &a, pol: idempotent})
	return a, err
}

// accountEvery bounds the account reads: a stopped instance asks at most
// once a minute.
const accountEvery = time.Minute

// stoppedOnPurpose: vast or a user stopped an instance, its host did not
// lose it: shown stopped, its machine contract stopped (cur_state: a host
// that fails leaves the contract running and shows offline or exited), or
// its container meant to be stopped (intended_status).
func stoppedOnPurpose(in Instance) bool {
	return in.Status() == "stopped" || in.CurState == "stopped" || in.IntendedStatus == "stopped"
}

// checkStops ends the on-demand rentals vast stopped (none of them
// blocklists a host): with the account out of money EndNoBalance, and
// renting halts (billing) saying what to do; otherwise EndStopped. An
// account that cannot be read (the key lacks user_read) reads as
// EndStopped and is logged.
func (p *Provider) checkStops(ctx context.Context, stopped []*provider.Rental) {
	if len(stopped) == 0 {
		return
	}
	acct, err := p.account(ctx)
	reason := EndStopped
	switch {
	case err != nil:
		p.log.Warn("vast: the account's balance is not known (the key needs user_read to tell); a stopped rental is ended as stopped", "err", err)
	case acct.Empty():
		reason = EndNoBalance
		p.haltBilling(fmt.Sprintf("vast stopped this cluster's instances: the account has no money left (%s), and vast stops every instance at zero. "+
			"Add credit (or turn on autobilling) in vast's console (Billing); renting resumes by itself once a create succeeds, tried again after this pause", acct))
	}
	for _, r := range stopped {
		r.EndNow = reason
		p.log.Warn("vast stopped an on-demand rental; ending it (its host is not blocklisted)", "candidate", r.CandidateID,
			"instance", r.InstanceID, "host", r.HostID, "reason", reason)
	}
}

// account reads the account at most every accountEvery.
func (p *Provider) account(ctx context.Context) (Account, error) {
	now := p.cfg.Now()
	p.mu.Lock()
	if !p.acctAt.IsZero() && now.Sub(p.acctAt) < accountEvery {
		a := p.acct
		p.mu.Unlock()
		return a, nil
	}
	p.mu.Unlock()
	a, err := p.cfg.Client.ShowUser(ctx)
	if err != nil {
		return a, err
	}
	p.mu.Lock()
	p.acct, p.acctAt = a, now
	p.mu.Unlock()
	return a, nil
}
