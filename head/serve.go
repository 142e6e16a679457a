package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	rayvast "github.com/rayvast/rayvast"
	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/enroll"
	"github.com/rayvast/rayvast/head/healthpoll"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/nodeapi"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/ratelimit"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/head/rentals"
	"github.com/rayvast/rayvast/head/statedir"
)

type serveFlags struct {
	state, config, agent, shim, bootloader string
	listenA, listenB, provider, logLevel   string
	firewall                               string
	retention                              time.Duration
}

// Refusal rate limit per source IP: a burst of 10 (SPEC §6), then one more
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
	fs.StringVar(&f.config, "config", "", "config file (JSON, SPEC §8)")
	fs.StringVar(&f.agent, "agent", "", "agent binary served at /bootstrap (default: the one built into head)")
	fs.StringVar(&f.shim, "shim", "", "Python file put first on Ray's PYTHONPATH (default: the built-in sitecustomize.py; none: no shim)")
	fs.StringVar(&f.bootloader, "bootloader", "", "bootloader.sh, the command of built-in rentals (default: the one built into head)")
	fs.StringVar(&f.listenA, "listen-a", "", "port A address (HTTPS enrollment), e.g. 203.0.113.1:8443")
	fs.StringVar(&f.listenB, "listen-b", "", "port B address (mutual TLS heartbeats), e.g. 203.0.113.1:8444")
	fs.StringVar(&f.provider, "provider", "", "none (external provider via the admin API), docker or vast (default: the config's provider.kind, else none)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.firewall, "firewall", "auto", "nftables guard of ports A and B (table inet rayvast_<app id prefix>): on, off, or auto (on with --provider vast)")
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
	switch f.provider {
	case "", "none", "docker", "vast":
	default:
		fmt.Fprintf(stderr, "head serve: --provider %q: want none, docker or vast\n", f.provider)
		return 2
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		fmt.Fprintf(stderr, "head serve: %v\n", err)
		return 2
	}
	f.provider = providerKind(f.provider, cfg)
	switch {
	case f.firewall != "on" && f.firewall != "off" && f.firewall != "auto":
		fmt.Fprintf(stderr, "head serve: --firewall %q: want on, off or auto\n", f.firewall)
		return 2
	case f.firewall == "on" && f.provider == "none":
		// The rules follow the built-in provider's rentals; with an external
		// provider the head does not know when a candidate starts running.
		fmt.Fprintln(stderr, "head serve: --firewall on needs --provider docker or vast")
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
}

func serve(ctx context.Context, f serveFlags, cfg *config.Config, log *slog.Logger, hooks serveHooks) error {
	st, err := statedir.Load(f.state)
	if err != nil {
		return err
	}
	agent, err := loadAgent(f.agent)
	if err != nil {
		return err
	}
	agentSum := sha256.Sum256(agent)
	shim, err := loadShim(f.shim, log)
	if err != nil {
		return err
	}
	command := rayvast.Bootloader()
	if f.bootloader != "" {
		b, err := os.ReadFile(f.bootloader)
		if err != nil {
			return fmt.Errorf("read bootloader: %w", err)
		}
		command = string(b)
	}
	cluster := cfg.Cluster
	if cluster == "" {
		cluster = st.Cluster
	} else if st.Cluster != "" && st.Cluster != cluster {
		// Rentals are found by a label naming the cluster: a renamed cluster
		// would no longer see, and so never end, the rentals it made.
		return fmt.Errorf("config cluster %q differs from the state dir's %q (head init --cluster); rentals are labelled with it, keep one name", cluster, st.Cluster)
	}

	reg, closeState, err := openState(st, log)
	if err != nil {
		return err
	}
	defer closeState()
	block := blocklist.New(time.Now)
	prov, err := newProvider(f.provider, cfg.Provider, block, provider.Options{Cluster: cluster, StateDir: st.Dir, HeadIP: st.HeadIP, Log: log.With("provider", f.provider)})
	if err != nil {
		return err
	}
	if prov != nil {
		defer prov.Close()
	}
	driver := rentals.New(rentals.Config{Provider: prov, Registry: reg, Blocklist: block, NodeTypes: cfg.NodeTypes,
		Command: command, MaxDPHTotal: cfg.MaxDPHTotal, Log: log.With("part", "rentals")})
	defer driver.Close()
	if err := driver.Reattach(ctx); err != nil {
		return err
	}
	if hooks.provider != nil {
		if err := hooks.provider(ctx); err != nil {
			return err
		}
	}

	lnA, err := net.Listen("tcp", f.listenA)
	if err != nil {
		return fmt.Errorf("listen port A: %w", err)
	}
	lnB, err := net.Listen("tcp", f.listenB)
	if err != nil {
		lnA.Close()
		return fmt.Errorf("listen port B: %w", err)
	}
	lnAdmin, err := admin.Listen(st.Path(statedir.AdminSocket))
	if err != nil {
		lnA.Close()
		lnB.Close()
		return err
	}
	portA, portB := lnA.Addr().(*net.TCPAddr).Port, lnB.Addr().(*net.TCPAddr).Port

	m := &metrics.Metrics{}
	nodes := nodeapi.New(nodeapi.Config{Registry: reg, CA: st.CA.Pool(), Interval: cfg.HeartbeatInterval,
		Metrics: m, Destroy: driver.Destroy, Log: log.With("port", "B")})
	enr := enroll.New(enroll.Config{
		Registry: reg, Blocklist: block, Limiter: ratelimit.New(refusalBurst, refusalRefill, nil), PortCheck: boundedPortCheck(maxPortChecks),
		CA: st.CA, NodeTypes: cfg.NodeTypes, Agent: agent, Destroy: driver.Destroy, Metrics: m,
		Log: log.With("port", "A"), Ray: cfg.Ray,
		Bundle: enroll.Bundle{ClusterToken: st.ClusterToken, AppID: st.AppID, AppRootKey: st.AppRootKey, Shim: shim,
			RayHeadAddress: cfg.Ray.HeadAddress, GuestAPI: cfg.GuestAPI, PortB: portB, IntervalS: nodes.IntervalS()},
	})
	adm := admin.New(admin.Config{Registry: reg, Blocklist: block, Rentals: driver, NodeTypes: cfg.NodeTypes, Metrics: m,
		Log: log.With("part", "admin"),
		Env: admin.Env{Head: st.HeadIP, PortA: portA, PortB: portB, BootstrapSHA256: hex.EncodeToString(agentSum[:]), CASHA256: st.CA.Fingerprint(),
			PublicLogs: cfg.PublicLogs}})

	if prov != nil {
		stopLoop, err := reconcile.StartServe(ctx, reconcile.ServeConfig{Admin: adm.Handler(), End: driver.End, Rentals: prov,
			NodeTypes: cfg.NodeTypes, StateDir: st.Dir, Ports: []int{portA, portB},
			Firewall:    f.firewall == "on" || (f.firewall == "auto" && f.provider == "vast"),
			MaxDPHTotal: cfg.MaxDPHTotal,
			Log:         log.With("part", "reconcile")})
		if err != nil {
			lnA.Close()
			lnB.Close()
			lnAdmin.Close()
			return err
		}
		defer stopLoop()
	}

	errLog := slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	servers := []struct {
		name string
		srv  *http.Server
		ln   net.Listener
	}{
		{"port A", &http.Server{Handler: enr.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
			// 3 min: /bootstrap is ~9 MB to a far-away rental; longer only lets a
			// stranger hold a connection.
			WriteTimeout: 3 * time.Minute, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10, ErrorLog: errLog,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{st.ServerCert}, MinVersion: tls.VersionTLS12}}, lnA},
		{"port B", &http.Server{Handler: nodes.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
			// Idle 90 s: long enough to keep a node's connection across 30 s
			// heartbeats, short enough that idle strangers do not pile up.
			WriteTimeout: 30 * time.Second, IdleTimeout: 90 * time.Second, MaxHeaderBytes: 16 << 10, ErrorLog: errLog,
			TLSConfig: nodes.TLSConfig(st.ServerCert)}, lnB},
		{"admin", &http.Server{Handler: adm.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
			ErrorLog: errLog}, lnAdmin},
	}

	loopCtx, stopLoops := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Add(3)
	go func() { defer loops.Done(); pruneEnded(loopCtx, reg, f.retention, m, log) }()
	go func() { defer loops.Done(); nodes.WatchLost(loopCtx, driver.Destroy) }()
	go func() {
		defer loops.Done()
		nodes.PollHealth(loopCtx, healthpoll.New(healthpoll.Config{CA: st.CA.Pool()}), cfg.HealthFailureThreshold)
	}()

	serveErr := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			var err error
			if s.srv.TLSConfig != nil {
				err = s.srv.ServeTLS(s.ln, "", "")
			} else {
				err = s.srv.Serve(s.ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("%s: %w", s.name, err)
			}
		}()
	}
	log.Info("head serving", "port_a", lnA.Addr().String(), "port_b", lnB.Addr().String(),
		"admin", st.Path(statedir.AdminSocket), "provider", f.provider, "head_ip", st.HeadIP,
		"ca_sha256", st.CA.Fingerprint(), "bootstrap_sha256", hex.EncodeToString(agentSum[:]),
		"heartbeat_interval", cfg.HeartbeatInterval.String(), "node_types", len(cfg.NodeTypes))
	if hooks.listening != nil {
		hooks.listening(lnA.Addr().String(), lnB.Addr().String(), st.Path(statedir.AdminSocket))
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("stopping: finishing in-flight requests")
	case runErr = <-serveErr:
	}
	stopLoops()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.srv.Shutdown(sctx); err != nil {
				log.Warn("shutdown", "server", s.name, "err", err)
			}
		}()
	}
	wg.Wait()
	loops.Wait()
	os.Remove(st.Path(statedir.AdminSocket))
	if runErr == nil {
		log.Info("stopped")
	}
	return runErr
}
