package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// printTerms lists the rentals whose terms matter (vast): an
// interruptible rental's bid beside its offer's on-demand price, the
// contract's end date, and a host's price increase with what the head did
// (rejected by default, accepted under price_increase_max_dph, or the
// rental ending above it). Nothing when no rental has such terms.
func printTerms(w io.Writer, rs []wire.RentalTerms, now time.Time) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RENTAL\tCANDIDATE\tBID $/H\tON-DEMAND $/H\tCONTRACT ENDS\tPRICE INCREASE")
	for _, r := range rs {
		ends := ""
		if r.EndDate != nil {
			ends = r.EndDate.UTC().Format(time.RFC3339) + " (in " + r.EndDate.Sub(now).Round(time.Minute).String() + ")"
		}
		inc := ""
		if p := r.PriceIncrease; p != nil {
			inc = fmt.Sprintf("$%.3f → $%.3f/h %s", p.OldDPH, p.NewDPH, p.Action)
		}
		row(tw, r.InstanceID, r.CandidateID, dollars(r.BidDPH, 3), dollars(r.OnDemandDPH, 3), ends, inc)
	}
	tw.Flush()
}
