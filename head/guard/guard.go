// Package guard is the firewall's lifecycle in a serving head: it opens
// the nftables table over ports A and B, keeps the table's Ray head ports
// equal to what the Ray head listens on (new random ones after each
// restart), opens the table to the candidates an external provider names
// (Follow), and removes the table when the head stops. The reconcile loop,
// which rents, opens it to its own candidates through Firewall.
package guard

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/internal/wire"
)

// Config is one head's firewall.
type Config struct {
	Table string // firewall.TableFor(the state's app id)
	Ports []int  // A and B
	// RayPorts lists the Ray head's listening ports (nil: no Ray head
	// here), re-read every Every.
	RayPorts func() ([]int, error)
	Every    time.Duration                                  // default 1 s
	Nft      func(ctx context.Context, script string) error // nil: the nft binary
	Log      *slog.Logger
}

// Guard is an open firewall table and the loops that keep it.
type Guard struct {
	cfg    Config
	fw     *firewall.Firewall
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Open opens the table (ports A and B dropped for everyone but the
// allowed IPs and this machine) and starts guarding the Ray head's ports.
func Open(ctx context.Context, cfg Config) (*Guard, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	fw, err := firewall.Open(ctx, firewall.Config{Table: cfg.Table, Ports: cfg.Ports, Nft: cfg.Nft, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	g := &Guard{cfg: cfg, fw: fw}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	if cfg.RayPorts != nil {
		g.every("firewall: Ray head ports", func() error {
			ps, err := cfg.RayPorts()
			if err == nil {
				err = fw.SyncPorts(ps)
			}
			return err
		})
	}
	return g, nil
}

// Firewall is the open table, for the reconcile loop to sync.
func (g *Guard) Firewall() *firewall.Firewall { return g.fw }

// Follow keeps the table's allowed IPs equal to the public IPs of the
// running and enrolled candidates that cands lists (an external provider
// rents: the admin API knows them), every Every.
func (g *Guard) Follow(cands func() []wire.Candidate) {
	g.every("firewall", func() error { return g.fw.Sync(firewall.AllowedIPs(cands())) })
}

// Close ends the loops and removes the table.
func (g *Guard) Close() {
	g.cancel()
	g.wg.Wait()
	if err := g.fw.Close(); err != nil {
		g.cfg.Log.Warn("firewall", "err", err)
	}
}

// every runs sync at once and then every interval until Close, logging an
// error once until it changes or clears. A failed sync keeps what the
// table holds.
func (g *Guard) every(what string, sync func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		var lastErr string
		for {
			err := sync()
			if err != nil && err.Error() != lastErr {
				g.cfg.Log.Warn(what, "err", err)
			}
			lastErr = ""
			if err != nil {
				lastErr = err.Error()
			}
			select {
			case <-g.ctx.Done():
				return
			case <-time.After(g.cfg.Every):
			}
		}
	}()
}

// WarnLeftover, for a head with the firewall off, warns when the table of
// an earlier run with it on (a crashed head) still drops ports A and B
// for everyone but its stale IPs. It is not removed: it may be another
// head's on this machine.
func WarnLeftover(ctx context.Context, table string, nft func(ctx context.Context, script string) error, log *slog.Logger) {
	if firewall.Exists(ctx, table, nft) {
		log.Warn("firewall off, but nftables table inet "+table+" of an earlier run still guards its ports; "+
			"remove it with `head down` or `nft delete table inet "+table+"` if it is not another head's", "table", "inet "+table)
	}
}
