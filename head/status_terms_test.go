package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestStatusTerms: head status shows an interruptible rental's bid and
// on-demand price, a contract's end date, and a price increase with what
// the head did; nothing for a provider without such terms.
func TestStatusTerms(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	end := now.Add(3 * time.Hour)
	var b bytes.Buffer
	printTerms(&b, []wire.RentalTerms{
		{InstanceID: "31000001", CandidateID: "c-1", BidDPH: 0.044, OnDemandDPH: 0.1},
		{InstanceID: "31000002", CandidateID: "c-2", EndDate: &end,
			PriceIncrease: &wire.PriceIncrease{OldDPH: 0.1, NewDPH: 0.2, Action: wire.PriceRejected, At: now}},
	}, now)
	got := b.String()
	for _, want := range []string{"BID $/H", "ON-DEMAND $/H", "$0.044", "$0.100", "2026-11-30T15:00:00Z (in 3h0m0s)", "$0.100 → $0.200/h rejected"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	if printTerms(&b, nil, now); b.Len() != 0 {
		t.Errorf("printed %q for no terms", b.String())
	}
}
