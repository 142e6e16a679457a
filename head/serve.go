package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/head/server"
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
	f.provider = server.ProviderKind(f.provider, cfg)
	f.privateNetwork = server.PrivateNetwork(cfg)
	switch {
	case f.firewall != "on" && f.firewall != "off" && f.firewall != "auto":
		fmt.Fprintf(stderr, "head serve: --firewall %q: want on, off or auto\n", f.firewall)
		return 2
	}
	f.nft = headNft
	if err := f.server(nil, cfg, nil, server.Hooks{}).CheckFirewall(context.Background()); err != nil {
		fmt.Fprintf(stderr, "head serve: %v\n", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		fmt.Fprintf(stderr, "head serve: --log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	st, err := statedir.Load(f.state)
	if err != nil {
		log.Error("head serve failed", "err", err)
		return 1
	}
	if err := server.Run(ctx, f.server(st, cfg, log, server.Hooks{})); err != nil {
		log.Error("head serve failed", "err", err)
		return 1
	}
	return 0
}

// server is the server's Config from the flags, the state dir (loaded
// once) and the config file.
func (f serveFlags) server(st *statedir.State, cfg *config.Config, log *slog.Logger, hooks server.Hooks) server.Config {
	return server.Config{State: st, File: cfg, Agent: f.agent, Shim: f.shim, Bootloader: f.bootloader,
		ListenA: f.listenA, ListenB: f.listenB, Provider: f.provider, Firewall: f.firewall, PrivateNetwork: f.privateNetwork,
		Retention: f.retention, Nft: f.nft, Log: log, Hooks: hooks}
}
