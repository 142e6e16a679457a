package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/admin"
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
	// Firewall is the open table the loop opens to its live candidates
	// (head/guard); nil: the firewall is off.
	Firewall Firewall
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
	// Drainer and DrainDeadline as in Config (nil: no drain before a
	// planned end).
	Drainer       Drainer
	DrainDeadline time.Duration
	Drains        *Drains // as in Config
	Log           *slog.Logger
}

// StartServe starts the loop. The returned stop ends it; it destroys
// nothing.
func StartServe(ctx context.Context, cfg ServeConfig) (stop func(), err error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c := Config{Cluster: InProcess(cfg.Admin), Rentals: cfg.Rentals, Blocklist: cfg.Blocklist, Status: cfg.Status, NodeTypes: cfg.NodeTypes,
		DownFile: DownFile(cfg.StateDir), EnrollTimeout: cfg.EnrollTimeout, Spares: cfg.Spares, MaxDPHTotal: cfg.MaxDPHTotal, RayScales: cfg.RayScales, Pauses: cfg.Pauses, Log: cfg.Log,
		SweepEvery: cfg.SweepEvery, ReplaceBefore: cfg.ReplaceBefore, Firewall: cfg.Firewall,
		Drainer: cfg.Drainer, DrainDeadline: cfg.DrainDeadline, Drains: cfg.Drains}
	loop := New(c)
	loopCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); loop.Run(loopCtx) }()
	return func() {
		cancel()
		wg.Wait()
	}, nil
}
