package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/statedir"
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
	var cands []wire.Candidate
	var nodes []wire.Node
	if err := c.Do(ctx, http.MethodGet, "/v1/candidates", nil, &cands, http.StatusOK); err != nil {
		fmt.Fprintf(stderr, "head status: %v\n", err)
		return 1
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/nodes", nil, &nodes, http.StatusOK); err != nil {
		fmt.Fprintf(stderr, "head status: %v\n", err)
		return 1
	}
	printStatus(stdout, cands, nodes, time.Now())
	printRayHead(stdout, *state, time.Now())
	return 0
}

// printStatus writes the two tables; now is passed in so a test can pin ages.
func printStatus(w io.Writer, cands []wire.Candidate, nodes []wire.Node, now time.Time) {
	age := func(t time.Time) string { return now.Sub(t).Round(time.Second).String() }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CANDIDATE\tTYPE\tINSTANCE\tPUBLIC IP\tHOST\tSTATE\tAGE\tREASON")
	for _, x := range cands {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.CandidateID, x.NodeType, dash(x.InstanceID), dash(x.PublicIP), dash(x.HostID), x.State, age(x.CreatedAt), dash(x.Reason))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "NODE\tTYPE\tPUBLIC IP\tSTATE\tAGE\tRAY\tHEALTH\tLAST HEARTBEAT")
	for _, n := range nodes {
		hb := "-"
		if n.LastHeartbeat != nil {
			hb = age(*n.LastHeartbeat) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.InstanceID, n.NodeType, n.PublicIP, n.State, age(n.EnrolledAt), dash(n.Ray.State), n.Health, hb)
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
