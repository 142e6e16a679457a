package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/head/rentals"
	"github.com/rayvast/rayvast/head/statedir"
)

type serveFlags struct {
	state, config, agent, shim, bootloader string
	listenA, listenB, provider, logLevel   string
	firewall                               string
	// privateNetwork is the config's provider.private_network (kind none).
	privateNetwork bool
	retention      time.Duration
	// nft runs nft scripts for the firewall (nil: the nft binary); tests
	// set it.
	nft func(ctx context.Context, script string) error
}

// Refusal rate limit per source IP: a burst of 10 (docs/protocol.md §6), then one more
// every 10 s.
const (
	refusalBurst  = 10
	refusalRefill = 10 * time.Second
	// shutdownGrace bounds how long SIGTERM waits for in-flight requests
	// (an enrollment's port check takes at most 10 s).
	shutdownGrace = 30 * time.Second
)

func runServe(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("head serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	fs.StringVar(&f.state, "state", "", "state dir made by head init")
	fs.StringVar(&f.config, "config", "", "config file (JSON; docs/running.md \"Run it for real\" shows one)")
	fs.StringVar(&f.agent, "agent", "", "agent binary served at /bootstrap (default: the one built into head)")
	fs.StringVar(&f.shim, "shim", "", "Python file put first on Ray's PYTHONPATH (default: the built-in sitecustomize.py; none: no shim)")
	fs.StringVar(&f.bootloader, "bootloader", "", "bootloader.sh, the command of built-in rentals (default: the one built into head)")
	fs.StringVar(&f.listenA, "listen-a", "", "port A address (HTTPS enrollment), e.g. 203.0.113.1:8443")
	fs.StringVar(&f.listenB, "listen-b", "", "port B address (mutual TLS heartbeats), e.g. 203.0.113.1:8444")
	fs.StringVar(&f.provider, "provider", "", "none (external provider via the admin API), docker or vast (default: the config's provider.kind, else none)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.firewall, "firewall", "auto", "nftables guard of ports A and B (table inet rayvast_<app id prefix>): on, off, or auto (on with --provider vast, and with none unless the config's provider.private_network)")
	fs.DurationVar(&f.retention, "ended-retention", registry.DefaultRetention, "how long ended candidates stay listed before they are pruned")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: head serve --state DIR --config FILE [--agent FILE] [--shim FILE|none] --listen-a ADDR --listen-b ADDR [--provider none|docker|vast] [--firewall on|off|auto]\n\n"+
			"Serves port A (/bootstrap, /ca.pem, /enroll), port B (/heartbeat, /report) and\n"+
			"the admin API on DIR/admin.sock (0600). SIGTERM: stop accepting, finish\n"+
			"in-flight requests, exit 0. An invalid config exits 2 with the reason.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if f.state == "" || f.config == "" || f.listenA == "" || f.listenB == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if f.provider != "" {
		if err := config.CheckProviderKind(f.provider); err != nil {
			fmt.Fprintf(stderr, "head serve: --provider %v\n", err)
			return 2
		}
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		fmt.Fprintf(stderr, "head serve: %v\n", err)
		return 2
	}
	f.provider = providerKind(f.provider, cfg)
	f.privateNetwork = privateNetwork(cfg)
	switch {
	case f.firewall != "on" && f.firewall != "off" && f.firewall != "auto":
		fmt.Fprintf(stderr, "head serve: --firewall %q: want on, off or auto\n", f.firewall)
		return 2
	}
	f.nft = headNft
	if err := checkFirewall(context.Background(), f, f.nft); err != nil {
		fmt.Fprintf(stderr, "head serve: %v\n", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		fmt.Fprintf(stderr, "head serve: --log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := serve(ctx, f, cfg, log, serveHooks{}); err != nil {
		log.Error("head serve failed", "err", err)
		return 1
	}
	return 0
}

// serveHooks let `head up` act between serve's steps; `head serve` sets none.
type serveHooks struct {
	// provider runs once the provider is open (a Docker network exists, so
	// its gateway can be bound) and before the ports listen.
	provider func(ctx context.Context) error
	// listening runs once ports A and B and the admin socket listen.
	listening func(portA, portB, adminSock string)
	// rayPorts lists the Ray head's ports for the firewall to guard (nil:
	// no Ray head here).
	rayPorts func() ([]int, error)
	// rayHead is the running Ray head's ID for heartbeat answers (nil: the
	// head runs no Ray head).
	rayHead func() (id string, ok bool)
}

// serve runs the head in its phases: read the inputs, open the state, the
// provider and its driver, the listeners, the servers' parts, the
// reconcile loop and the background loops; then serve until ctx ends.
func serve(ctx context.Context, f serveFlags, cfg *config.Config, log *slog.Logger, hooks serveHooks) error {
	in, err := loadInputs(f, cfg, log)
	if err != nil {
		return err
	}
	st := in.st
	reg, closeState, err := openState(st, log)
	if err != nil {
		return err
	}
	defer closeState()
	block := blocklist.New(time.Now)
	prov, err := startProvider(ctx, f.provider, cfg, block, provider.Options{Cluster: in.cluster, StateDir: st.Dir, HeadIP: st.HeadIP, Log: log.With("provider", f.provider)})
	if err != nil {
		return err
	}
	if prov != nil {
		defer prov.Close()
	}
	driver := rentals.New(rentals.Config{Provider: prov, Registry: reg, Blocklist: block, NodeTypes: cfg.NodeTypes,
		Command: in.command, MaxDPHTotal: cfg.MaxDPHTotal, Log: log.With("part", "rentals")})
	defer driver.Close()
	if err := driver.Reattach(ctx); err != nil {
		return err
	}
	if hooks.provider != nil {
		if err := hooks.provider(ctx); err != nil {
			return err
		}
	}

	ls, err := openListeners(f, st)
	if err != nil {
		return err
	}
	var pauses *reconcile.Pauses
	if prov != nil && cfg.Autoscaler != nil {
		pauses = &reconcile.Pauses{}
	}
	p := newParts(cfg, in, reg, block, driver, ls, pauses, hooks.rayHead, log)
	if prov != nil {
		sweep, replaceBefore := timing(prov)
		stopLoop, err := reconcile.StartServe(ctx, reconcile.ServeConfig{Admin: p.admin, Rentals: prov,
			Blocklist: block, Status: driver.ProviderStatus,
			NodeTypes: cfg.NodeTypes, StateDir: st.Dir, Ports: []int{ls.portA(), ls.portB()},
			Firewall:      firewallOn(f),
			Nft:           f.nft,
			RayPorts:      hooks.rayPorts,
			MaxDPHTotal:   cfg.MaxDPHTotal,
			RayScales:     cfg.Autoscaler != nil,
			Pauses:        pauses,
			SweepEvery:    sweep,
			ReplaceBefore: replaceBefore,
			Log:           log.With("part", "reconcile")})
		if err != nil {
			ls.close()
			return err
		}
		defer stopLoop()
	} else if firewallOn(f) {
		// An external provider rents (none): the firewall follows the
		// candidates and nodes it names through the admin API.
		stopGuard, err := reconcile.StartGuard(ctx, reconcile.GuardConfig{Admin: p.admin, StateDir: st.Dir,
			Ports: []int{ls.portA(), ls.portB()}, RayPorts: hooks.rayPorts, Nft: f.nft, Log: log.With("part", "firewall")})
		if err != nil {
			ls.close()
			return err
		}
		defer stopGuard()
	}
	stopLoops, waitLoops := startLoops(reg, f.retention, p, driver, cfg, st, log)
	servers := httpServers(p, ls, st, log)
	serveErr := startServers(servers)
	log.Info("head serving", "port_a", ls.a.Addr().String(), "port_b", ls.b.Addr().String(),
		"admin", st.Path(statedir.AdminSocket), "provider", f.provider, "head_ip", st.HeadIP,
		"ca_sha256", st.CA.Fingerprint(), "bootstrap_sha256", hex.EncodeToString(in.agentSum[:]),
		"heartbeat_interval", cfg.HeartbeatInterval.String(), "node_types", len(cfg.NodeTypes))
	if hooks.listening != nil {
		hooks.listening(ls.a.Addr().String(), ls.b.Addr().String(), st.Path(statedir.AdminSocket))
	}
	err = shutdownWhenDone(ctx, serveErr, servers, stopLoops, log)
	waitLoops()
	os.Remove(st.Path(statedir.AdminSocket))
	if err == nil {
		log.Info("stopped")
	}
	return err
}
