package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/termtext"
	"github.com/rayvast/rayvast/internal/wire"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("head status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state dir of the running head")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: head status --state DIR\n\nPrints the candidates and nodes of the head serving DIR/admin.sock.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *state == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	c := adminclient.Unix(filepath.Join(*state, statedir.AdminSocket), 30*time.Second)
	snap, err := c.Snapshot(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "head status: %s\n", termtext.Field(err.Error()))
		return 1
	}
	printStatus(stdout, snap.Candidates, snap.Nodes, time.Now())
	if prov, err := c.Provider(ctx); err == nil {
		printProvider(stdout, prov, time.Now())
		printTerms(stdout, prov.Rentals, time.Now())
	}
	printRayHead(stdout, *state, time.Now())
	return 0
}

// printProvider says why the built-in provider rents nothing now (vast's
// daily search quota, a refused key, billing); nothing while it rents.
func printProvider(w io.Writer, st wire.ProviderStatus, now time.Time) {
	if st.Halted == "" {
		return
	}
	until := "until fixed (then restart the head)"
	if st.Until != nil {
		until = "until " + st.Until.UTC().Format(time.RFC3339) + " (in " + st.Until.Sub(now).Round(time.Minute).String() + ")"
	}
	fmt.Fprintf(w, "\nRENTING HALTED  %s: %s, %s\n", termtext.Field(st.Kind), termtext.Field(st.Halted), until)
	if st.Detail != "" {
		fmt.Fprintf(w, "  %s\n", termtext.Field(st.Detail))
	}
}

// printStatus writes the two tables; now is passed in so a test can pin ages.
func printStatus(w io.Writer, cands []wire.Candidate, nodes []wire.Node, now time.Time) {
	age := func(t time.Time) string { return now.Sub(t).Round(time.Second).String() }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CANDIDATE\tTYPE\tINSTANCE\tPUBLIC IP\tHOST\tSTATE\tAGE\t$/H\tCOST\tREASON")
	for _, x := range cands {
		row(tw, x.CandidateID, x.NodeType, x.InstanceID, x.PublicIP, x.HostID, x.State, age(x.CreatedAt),
			dollars(x.DPHTotal, 3), dollars(metrics.Cost(x, now), 4), x.Reason)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "NODE\tTYPE\tPUBLIC IP\tSTATE\tAGE\tRAY\tRESTARTS\tHEALTH\tLAST HEARTBEAT")
	for _, n := range nodes {
		hb := "-"
		if n.LastHeartbeat != nil {
			hb = age(*n.LastHeartbeat) + " ago"
		}
		row(tw, n.InstanceID, n.NodeType, n.PublicIP, n.State, age(n.EnrolledAt), rayColumn(n), strconv.Itoa(n.Ray.Restarts), n.Health, hb)
	}
	tw.Flush()
	if m := metrics.Spending(cands, now); m.ClusterDPH > 0 || m.Spend > 0 {
		printMoney(w, m) // a free (docker) cluster has no cost line
	}
}

// printMoney writes the cluster's $/hour, per node type, and the spend so
// far (failed candidates' rentals included).
func printMoney(w io.Writer, m metrics.Money) {
	fmt.Fprintf(w, "\nCOST  cluster $%.3f/h", m.ClusterDPH)
	for _, n := range sortedTypes(m.NodeTypeDPH) {
		fmt.Fprintf(w, "  %s $%.3f/h", termtext.Field(n), m.NodeTypeDPH[n])
	}
	fmt.Fprintf(w, "  spent so far $%.4f\n", m.Spend)
}

func sortedTypes(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func dollars(v float64, prec int) string {
	if v == 0 {
		return "-"
	}
	return "$" + strconv.FormatFloat(v, 'f', prec, 64)
}

// row prints one table row. Every field may come from a provider, the admin
// API or a node, so each is made inert for the terminal (a tab or newline
// would also forge columns or rows); empty fields print as "-".
func row(w io.Writer, fields ...string) {
	for i, f := range fields {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, termtext.Field(dash(f)))
	}
	io.WriteString(w, "\n")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// rayColumn is a node's Ray state, and "not joined" while its agent says
// Ray has not joined within its bound (`head node` shows Ray's last words).
func rayColumn(n wire.Node) string {
	if n.Ray.State == wire.RayStarting && n.RayReport != nil && n.RayReport.Event == wire.EventRayNotJoined {
		return n.Ray.State + " (not joined)"
	}
	return n.Ray.State
}

// printTerms lists the rentals whose terms matter (vast): an
// interruptible rental's bid, the storage billed on top of it and its
// offer's dph_total at the minimum bid (what a bid search shows), the
// contract's end date, and a host's price increase with what the head did
// (rejected by default, accepted under price_increase_max_dph, or the
// rental ending above it). Nothing when no rental has such terms.
func printTerms(w io.Writer, rs []wire.RentalTerms, now time.Time) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RENTAL\tCANDIDATE\tBID $/H\tSTORAGE $/H\tOFFER AT MIN BID $/H\tCONTRACT ENDS\tPRICE INCREASE")
	for _, r := range rs {
		ends := ""
		if r.EndDate != nil {
			ends = r.EndDate.UTC().Format(time.RFC3339) + " (in " + r.EndDate.Sub(now).Round(time.Minute).String() + ")"
		}
		inc := ""
		if p := r.PriceIncrease; p != nil {
			inc = fmt.Sprintf("$%.3f → $%.3f/h %s", p.OldDPH, p.NewDPH, p.Action)
			if p.AppliesAt != nil && p.Action != wire.PriceRejected {
				inc += " from " + p.AppliesAt.UTC().Format(time.RFC3339)
			}
		}
		row(tw, r.InstanceID, r.CandidateID, dollars(r.BidDPH, 3), dollars(r.StorageDPH, 4), dollars(r.OfferDPH, 3), ends, inc)
	}
	tw.Flush()
}

// printRayHead is head status's line on the Ray head that head up runs
// (nothing when none ran from this state dir).
func printRayHead(w io.Writer, stateDir string, now time.Time) {
	st, ok, err := rayhead.ReadStatus(stateDir)
	switch {
	case err != nil:
		fmt.Fprintf(w, "\nRAY HEAD: unreadable: %v\n", err)
	case ok:
		fmt.Fprintf(w, "\n%s\n", rayHeadLine(st, now))
		if st.Ports != nil {
			p := st.Ports
			fmt.Fprintf(w, "  ports: GCS %d, dashboard %d (127.0.0.1), Ray Client %d; on loopback only: dashboard agent HTTP %d, metrics export %d, dashboard metrics %d, autoscaler metrics %d\n",
				p.GCS, p.Dashboard, p.RayClient, p.DashboardAgentHTTP, p.MetricsExport, p.DashboardMetrics, p.AutoscalerMetrics)
		}
		if st.Store != "" {
			fmt.Fprintf(w, "  GCS store: %s (the cluster outlives a restart of its GCS)\n", st.Store)
		}
		if st.LastWords != "" && st.State != rayhead.Running {
			fmt.Fprintf(w, "  failed %d times in a row the same way before it came up; Ray's last words:\n    %s\n",
				st.Failing, strings.ReplaceAll(termtext.Lines(st.LastWords), "\n", "\n    "))
		}
	}
}

func rayHeadLine(st rayhead.Status, now time.Time) string {
	line := fmt.Sprintf("RAY HEAD  %s  %s  for %s  restarts %d", st.Address, st.State, now.Sub(st.Since).Round(time.Second), st.Restarts)
	if st.PID != 0 {
		line += fmt.Sprintf("  pid %d", st.PID)
		if syscall.Kill(st.PID, 0) == syscall.ESRCH {
			// head up died without stopping it (its state file is stale)
			line += " (gone: is head up still running?)"
		}
	}
	if st.LastExit != "" {
		line += "  last exit: " + st.LastExit
	}
	return line + "  log " + st.Log
}
