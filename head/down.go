package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/wire"
)

// runDown ends the cluster: every candidate through the running head, every
// rental the provider lists by label, and the firewall table of a stopped
// head. A running head stays up with nothing rented until it restarts.
func runDown(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("head down", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state dir of the head")
	cfgPath := fs.String("config", "", "config file (for the cluster name; optional)")
	prov := fs.String("provider", "", "the head's built-in provider: none, docker or vast (default: the config's provider.kind, else none)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: head down --state DIR|--config FILE [--provider none|docker|vast]\n\n"+
			"Ends the cluster: every candidate through the running head (which then rents\n"+
			"nothing more until it restarts), every rental the provider still lists by\n"+
			"label, and the nftables table of a stopped head.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *state == "" && *cfgPath != "" {
		*state = defaultStateDir(*cfgPath) // where head up put it
	}
	if *state == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	st, err := statedir.Load(*state)
	if err != nil {
		fmt.Fprintf(stderr, "head down: %v\n", err)
		return 1
	}
	cluster := st.Cluster
	var pc *wire.ProviderConfig
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			fmt.Fprintf(stderr, "head down: %v\n", err)
			return 2
		}
		if cfg.Cluster != "" {
			cluster = cfg.Cluster
		}
		*prov, pc = providerKind(*prov, cfg), cfg.Provider
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	dc := reconcile.DownConfig{StateDir: st.Dir, Log: log,
		Firewall: closerFunc(func() error { return firewall.Remove(ctx, firewall.TableFor(st.AppID), nil) })}
	if *prov == "docker" {
		// Only list and end: the full provider would make the network and
		// start a DNS responder, rewriting a running head's DNS port in the
		// state dir.
		r, err := docker.OpenRentals(nil, cluster, log)
		if err != nil {
			fmt.Fprintf(stderr, "head down: %v\n", err)
			return 1
		}
		dc.Rentals = r
	} else {
		ps, err := readProviderSettings(*prov, pc)
		var p provider.Provider
		if err == nil {
			p, err = openProvider(ctx, ps, blocklist.New(time.Now), provider.Options{Cluster: cluster, StateDir: st.Dir, HeadIP: st.HeadIP, Log: log})
		}
		if err != nil {
			fmt.Fprintf(stderr, "head down: %v\n", err)
			return 1
		}
		if p != nil {
			defer p.Close()
			dc.Rentals = p
		}
	}
	rep, err := reconcile.Down(ctx, dc)
	fmt.Fprintf(stdout, "head running: %v; candidates ended: %d; instances destroyed: %d\n", rep.HeadRunning, len(rep.Ended), len(rep.Destroyed))
	if err != nil {
		fmt.Fprintf(stderr, "head down: %v\n", err)
		return 1
	}
	if *prov == "docker" && !rep.HeadRunning {
		// Nothing uses the cluster's network any more (a running head's
		// provider still would): remove it with anything left on it.
		if err := vastnet.Cleanup(ctx, dockerengine.New(""), func(c string) bool { return c == cluster }); err != nil {
			fmt.Fprintf(stderr, "head down: %v\n", err)
			return 1
		}
	}
	return 0
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
