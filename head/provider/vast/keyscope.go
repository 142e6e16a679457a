package vast

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
)

// epInvoices paces the key-scope probe on its own.
const epInvoices = "invoices"

// Needed is what the head's key needs (api-reference/permissions.mdx):
// instance_read (show and list instances), instance_write (create and
// destroy), misc (search offers) and user_read (the account's balance when
// vast stops a rental: account.go; vast-cli scripts/data/api_scopes.json).
const Needed = "instance_read, instance_write, misc, user_read"

// KeyReadsBilling says whether the key may read the account's billing:
// GET /api/v1/invoices/ (show_invoices.yaml), a billing_read call
// (permissions.mdx), over an empty time range with limit 1, so the answer
// is small. A 2xx means yes; a 4xx other than 429 means no (vast documents
// no answer of its own for a call outside a key's permissions); anything
// else is an error, and the caller says nothing.
func (c *Client) KeyReadsBilling(ctx context.Context, nowUnix int64) (bool, error) {
	when, _ := json.Marshal(map[string]any{"when": map[string]int64{"gte": nowUnix, "lte": nowUnix}})
	q := "select_filters=" + url.QueryEscape(string(when)) + "&limit=1"
	var out json.RawMessage
	err := c.do(ctx, call{op: "key scope (show invoices)", ep: epInvoices, method: http.MethodGet, path: "/api/v1/invoices/", query: q, out: &out, pol: idempotent})
	var ae *APIError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusTooManyRequests:
		return false, nil
	}
	return false, err
}

// CheckKeyScope says once, in the log, when the head's key can do more
// than the head needs (it reads billing), and how to make one that
// cannot. It never fails anything: a probe that errs says nothing.
func (p *Provider) CheckKeyScope(ctx context.Context) {
	more, err := p.cfg.Client.KeyReadsBilling(ctx, p.cfg.Now().Unix())
	switch {
	case err != nil:
		p.log.Debug("vast key scope not known", "err", err)
	case more:
		p.log.Warn("the vast API key can do more than the head needs: it reads the account's billing (billing_read); "+
			"make a key with only "+Needed+" (docs/vast.md: a key for the head)", "probe", "GET /api/v1/invoices/")
	default:
		p.log.Info("vast API key cannot read billing", "needs", Needed)
	}
}
