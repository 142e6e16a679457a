package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/internal/wire"
)

// ServeConfig is what `head serve` hands over when it rents instances itself.
type ServeConfig struct {
	Admin     *admin.Server              // the admin API, called in-process (InProcess)
	Rentals   Rentals                    // the built-in provider
	Blocklist Blocklist                  // takes vanished rentals' hosts
	Status    func() wire.ProviderStatus // nil: the provider always rents
	NodeTypes map[string]wire.NodeType
	StateDir  string // for the down marker
	// Firewall guards Ports (A and B) with nftables table inet
	// FirewallTable (default firewall.TableForStateDir(StateDir)) when true.
	Firewall      bool
	FirewallTable string
	Ports         []int
	// RayPorts, when set with Firewall, lists the Ray head's listening
	// ports (some random, and new ones after a restart); they are guarded
	// like Ports, re-read every RayPortsEvery (default 1 s).
	RayPorts      func() ([]int, error)
	RayPortsEvery time.Duration
	// Nft runs nft scripts (default: the nft binary); tests replace it.
	Nft func(ctx context.Context, script string) error
	// EnrollTimeout and Spares as in Config (zero: the defaults).
	EnrollTimeout time.Duration
	Spares        int
	MaxDPHTotal   float64 // the config's max_dph_total (0: no cap)
	RayScales     bool    // the config's autoscaler block: Ray owns the count (Config.RayScales)
	Pauses        *Pauses // where paused node types are recorded (Config.Pauses)
	// SweepEvery and ReplaceBefore as in Config (zero: a sweep every 30 s;
	// no replacement before a contract's end).
	SweepEvery    time.Duration
	ReplaceBefore time.Duration
	Log           *slog.Logger
}

// StartServe opens the firewall table (when asked) and starts the loop. The
// returned stop ends the loop and removes the table; it destroys nothing.
func StartServe(ctx context.Context, cfg ServeConfig) (stop func(), err error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.FirewallTable == "" {
		cfg.FirewallTable = firewall.TableForStateDir(cfg.StateDir)
	}
	var fw *firewall.Firewall
	if cfg.Firewall {
		fw, err = firewall.Open(ctx, firewall.Config{Table: cfg.FirewallTable, Ports: cfg.Ports, Nft: cfg.Nft, Log: cfg.Log.With("part", "firewall")})
		if err != nil {
			return nil, err
		}
	} else if table := cfg.FirewallTable; firewall.Exists(ctx, table, cfg.Nft) {
		// Left by a run with the firewall on that did not stop cleanly; not
		// removed here, since it may be another head's on this machine.
		cfg.Log.Warn("firewall off, but nftables table inet "+table+" of an earlier run still guards its ports; "+
			"remove it with `head down` or `nft delete table inet "+table+"` if it is not another head's", "table", "inet "+table)
	}
	c := Config{Cluster: InProcess(cfg.Admin), Rentals: cfg.Rentals, Blocklist: cfg.Blocklist, Status: cfg.Status, NodeTypes: cfg.NodeTypes,
		DownFile: DownFile(cfg.StateDir), EnrollTimeout: cfg.EnrollTimeout, Spares: cfg.Spares, MaxDPHTotal: cfg.MaxDPHTotal, RayScales: cfg.RayScales, Pauses: cfg.Pauses, Log: cfg.Log,
		SweepEvery: cfg.SweepEvery, ReplaceBefore: cfg.ReplaceBefore}
	if fw != nil {
		c.Firewall = fw
	}
	loop := New(c)
	loopCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); loop.Run(loopCtx) }()
	if fw != nil && cfg.RayPorts != nil {
		wg.Add(1)
		go func() { defer wg.Done(); guardRayPorts(loopCtx, fw, cfg.RayPorts, cfg.RayPortsEvery, cfg.Log) }()
	}
	return func() {
		cancel()
		wg.Wait()
		if err := fw.Close(); err != nil {
			cfg.Log.Warn("firewall", "err", err)
		}
	}, nil
}

// guardRayPorts keeps the firewall's Ray head ports equal to what ports
// finds, until ctx ends. A port is guarded within one interval of the Ray
// head opening it; a failed look keeps the ports guarded so far.
func guardRayPorts(ctx context.Context, fw *firewall.Firewall, ports func() ([]int, error), every time.Duration, log *slog.Logger) {
	syncEvery(ctx, every, log, "firewall: Ray head ports", func() error {
		ps, err := ports()
		if err == nil {
			err = fw.SyncPorts(ps)
		}
		return err
	})
}

// syncEvery runs sync at once and then every interval (default 1 s) until
// ctx ends, logging an error once until it changes or clears.
func syncEvery(ctx context.Context, every time.Duration, log *slog.Logger, what string, sync func() error) {
	if every <= 0 {
		every = time.Second
	}
	var lastErr string
	for {
		err := sync()
		if err != nil && err.Error() != lastErr {
			log.Warn(what, "err", err)
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
