// Package server is the head put together: the state, the provider and its
// driver, ports A and B, the admin API, the reconcile loop or the firewall
// guard, and the background loops, run in phases until the context ends.
// `head serve` and `head up` are its two callers; head up reaches the running
// head through *Server's Go methods, never through its own admin socket.
package server

import (
	"context"
	"encoding/hex"
	"os"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/raydrain"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/rentals"
	"github.com/rayvast/rayvast/head/statedir"
)

// Refusal rate limit per source IP: a burst of 10 (docs/protocol.md §6), then one more
// every 10 s.
const (
	refusalBurst  = 10
	refusalRefill = 10 * time.Second
	// shutdownGrace bounds how long SIGTERM waits for in-flight requests
	// (an enrollment's port check takes at most 10 s).
	shutdownGrace = 30 * time.Second
)

// Hooks let `head up` act between the server's steps; `head serve` sets none.
type Hooks struct {
	// Provider runs once the provider is open (a Docker network exists, so
	// its gateway can be bound) and before the ports listen.
	Provider func(ctx context.Context) error
	// Listening runs once ports A and B and the admin socket listen, with
	// the running head.
	Listening func(s *Server)
	// RayPorts lists the Ray head's ports for the firewall to guard (nil:
	// no Ray head here).
	RayPorts func() ([]int, error)
	// RayHead is the running Ray head's ID for heartbeat answers (nil: the
	// head runs no Ray head).
	RayHead func() (id string, ok bool)
}

// Run runs the head in its phases: read the inputs, open the state, the
// provider and its driver, the listeners, the servers' parts, the
// reconcile loop and the background loops; then serve until ctx ends.
func Run(ctx context.Context, c Config) error {
	f, cfg, log, hooks := c, c.File, c.logger(), c.Hooks
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
	prov, err := startProvider(ctx, f.Provider, cfg, block, provider.Options{Cluster: in.cluster, StateDir: st.Dir, HeadIP: st.HeadIP, Log: log.With("provider", f.Provider)})
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
	if hooks.Provider != nil {
		if err := hooks.Provider(ctx); err != nil {
			return err
		}
	}

	ls, err := openListeners(f, st)
	if err != nil {
		return err
	}
	var pauses *reconcile.Pauses
	drains := &reconcile.Drains{} // the loop's drains, told to the nodes on port B
	if prov != nil && cfg.Autoscaler != nil {
		pauses = &reconcile.Pauses{}
	}
	p := newParts(cfg, in, reg, block, driver, ls, pauses, drains, hooks.RayHead, log)
	g, err := openGuard(ctx, f, st, []int{ls.portA(), ls.portB()}, hooks.RayPorts, log.With("part", "firewall"))
	if err != nil {
		ls.close()
		return err
	}
	if g != nil {
		defer g.Close()
	}
	if prov != nil {
		sweep, replaceBefore := timing(prov)
		var fw reconcile.Firewall // never a typed nil: the loop asks fw == nil
		if g != nil {
			fw = g.Firewall()
		}
		stopLoop, err := reconcile.StartServe(ctx, reconcile.ServeConfig{Admin: p.admin, Rentals: prov,
			Blocklist: block, Status: driver.ProviderStatus,
			NodeTypes: cfg.NodeTypes, StateDir: st.Dir,
			Firewall:      fw,
			MaxDPHTotal:   cfg.MaxDPHTotal,
			RayScales:     cfg.Autoscaler != nil,
			Pauses:        pauses,
			SweepEvery:    sweep,
			ReplaceBefore: replaceBefore,
			// Planned ends drain the node in the Ray head head up runs
			// in this state dir (none: they end at once).
			Drainer: raydrain.New(st.Dir),
			Drains:  drains,
			Log:     log.With("part", "reconcile")})
		if err != nil {
			ls.close()
			return err
		}
		defer stopLoop()
	} else if g != nil {
		// An external provider rents (none): the firewall follows the
		// candidates and nodes it names through the admin API.
		g.Follow(p.admin.Candidates)
	}
	stopLoops, waitLoops := startLoops(reg, f.Retention, p, driver, cfg, st, log)
	servers := httpServers(p, ls, st, log)
	serveErr := startServers(servers)
	log.Info("head serving", "port_a", ls.a.Addr().String(), "port_b", ls.b.Addr().String(),
		"admin", st.Path(statedir.AdminSocket), "provider", f.Provider, "head_ip", st.HeadIP,
		"ca_sha256", st.CA.Fingerprint(), "bootstrap_sha256", hex.EncodeToString(in.agentSum[:]),
		"heartbeat_interval", cfg.HeartbeatInterval.String(), "node_types", len(cfg.NodeTypes))
	if hooks.Listening != nil {
		srv := &Server{PortA: ls.a.Addr().String(), PortB: ls.b.Addr().String(), AdminSocket: st.Path(statedir.AdminSocket),
			admin: p.admin, done: make(chan struct{})}
		defer close(srv.done)
		hooks.Listening(srv)
	}
	err = shutdownWhenDone(ctx, serveErr, servers, stopLoops, log)
	waitLoops()
	os.Remove(st.Path(statedir.AdminSocket))
	if err == nil {
		log.Info("stopped")
	}
	return err
}
