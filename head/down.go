package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/server"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/teardown"
	"github.com/rayvast/rayvast/internal/wire"
)

type downFlags struct {
	state, config, provider string
	noDrain                 bool
}

// downTarget is the cluster `head down` ends: its state dir, its name
// (the rentals' label) and the provider that rented them.
type downTarget struct {
	st      *statedir.State
	cluster string
	kind    string               // none, docker or vast
	pc      *wire.ProviderConfig // the config's provider block, if a config was given
	// head is the running head; nil: the one on the state dir's admin
	// socket, if any (head up's --down-on-exit passes its own, in-process).
	head teardown.Cluster
	// noDrain: end enrolled nodes at once, not after the head's loop
	// drained them in Ray (--no-drain).
	noDrain bool
	// headKind is the running head's own provider kind, asked over its
	// admin API when neither --config nor --provider names one ("" when
	// no head answered): a built-in one means the head has a loop that
	// drains.
	headKind string
}

// runDown ends the cluster: every candidate through the running head, every
// rental the provider lists by label, and the firewall table of a stopped
// head. A running head stays up with nothing rented until it restarts.
func runDown(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, code, ok := parseDownFlags(args, stderr)
	if !ok {
		return code
	}
	st, err := statedir.Load(f.state)
	if err != nil {
		fmt.Fprintf(stderr, "head down: %v\n", err)
		return 1
	}
	t := downTarget{st: st, cluster: st.Cluster, kind: f.provider, noDrain: f.noDrain}
	if f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			fmt.Fprintf(stderr, "head down: %v\n", err)
			return 2
		}
		if cfg.Cluster != "" {
			t.cluster = cfg.Cluster
		}
		t.kind, t.pc = server.ProviderKind(f.provider, cfg), cfg.Provider
	}
	if f.config == "" && f.provider == "" {
		t.headKind = headProviderKind(ctx, adminclient.Unix(st.Path(statedir.AdminSocket), 5*time.Second))
	}
	if err := down(ctx, t, stdout, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
		fmt.Fprintf(stderr, "head down: %v\n", err)
		return 1
	}
	return 0
}

// parseDownFlags parses head down's flags; when ok is false, the command
// exits with code (0 for --help).
func parseDownFlags(args []string, stderr io.Writer) (f downFlags, code int, ok bool) {
	fs := flag.NewFlagSet("head down", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.state, "state", "", "state dir of the head")
	fs.StringVar(&f.config, "config", "", "config file (for the cluster name; optional)")
	fs.StringVar(&f.provider, "provider", "", "the head's built-in provider: none, docker or vast (default: the config's provider.kind, else none)")
	fs.BoolVar(&f.noDrain, "no-drain", false, "end enrolled nodes at once, without waiting for the head to drain them in Ray first")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: head down --state DIR|--config FILE [--provider none|docker|vast] [--no-drain]\n\n"+
			"Ends the cluster: every candidate through the running head (which then rents\n"+
			"nothing more until it restarts), every rental the provider still lists by\n"+
			"label, and the nftables table of a stopped head. With a built-in provider and\n"+
			"head up's Ray head running, enrolled nodes are first drained in Ray by the\n"+
			"head (reason preemption, up to its drain deadline) unless --no-drain.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, 0, false
		}
		return f, 2, false
	}
	if f.state == "" && f.config != "" {
		f.state = defaultStateDir(f.config) // where head up put it
	}
	if f.state == "" || fs.NArg() > 0 {
		fs.Usage()
		return f, 2, false
	}
	return f, 0, true
}

// down runs head down's phases: open the provider's rentals, end the
// cluster (teardown.Down), report, and clean up after a stopped head
// (the docker provider's network).
func down(ctx context.Context, t downTarget, stdout io.Writer, log *slog.Logger) error {
	rentals, closeRentals, err := server.DownRentals(ctx, t.kind, t.pc,
		provider.Options{Cluster: t.cluster, StateDir: t.st.Dir, HeadIP: t.st.HeadIP, Log: log})
	if err != nil {
		return err
	}
	defer closeRentals()
	rep, err := teardown.Down(ctx, teardown.Config{StateDir: t.st.Dir, Cluster: t.head, Log: log, Rentals: rentals, DrainWait: t.drainWait(rentals != nil),
		Firewall: closerFunc(func() error { return firewall.Remove(ctx, firewall.TableFor(t.st.AppID), nil) })})
	fmt.Fprintf(stdout, "head running: %v; candidates ended: %d; instances destroyed: %d\n", rep.HeadRunning, len(rep.Ended), len(rep.Destroyed))
	if err != nil {
		return err
	}
	if !rep.HeadRunning {
		return server.Cleanup(ctx, t.kind, t.cluster)
	}
	return nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// headProviderKind is the running head's provider kind as its admin API
// says it (GET /v1/provider), "" when no head answers.
func headProviderKind(ctx context.Context, c *adminclient.Client) string {
	ps, err := c.Provider(ctx)
	if err != nil {
		return ""
	}
	return ps.Kind
}

// drainWait is how long head down leaves enrolled nodes to the running
// head's loop to drain in Ray: its drain deadline and a tick or two, when
// the head has a loop (a built-in provider: rentals here, or the running
// head's own kind with --state alone) and runs a Ray head in the state
// dir; 0 otherwise or with --no-drain.
func (t downTarget) drainWait(rentalsHere bool) time.Duration {
	if t.noDrain || !rentalsHere && !server.RentsItself(t.headKind) {
		return 0
	}
	if st, ok, err := rayhead.ReadStatus(t.st.Dir); err != nil || !ok || st.State != rayhead.Running {
		return 0
	}
	return reconcile.DefaultDrainDeadline + 20*time.Second
}
