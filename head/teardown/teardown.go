// Package teardown is `head down`: it ends a cluster through its running
// head (or without one) and through the provider, until nothing is rented.
// The `head down` verb and `head up --down-on-exit` share it; the verb
// reaches the head over its admin socket, head up in-process.
package teardown

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

// Cluster is the running head as head down sees it: its candidates, and
// a way to end one. Socket reaches it over the admin API; head up passes
// its own admin API's Go methods (reconcile.InProcess).
type Cluster interface {
	Candidates(ctx context.Context) ([]wire.Candidate, error)
	End(ctx context.Context, candidateID, reason string) error
}

// Config is what Down needs.
type Config struct {
	StateDir string
	Cluster  Cluster // default: Socket on the state dir's admin socket
	// Rentals, when set, are listed and destroyed until none is left: the
	// guarantee that nothing stays rented, with or without a running head.
	Rentals reconcile.Rentals
	// Firewall, when set, is closed (its table removed) at the end if no
	// head runs; a running head keeps its table (emptied: no live
	// candidate) and removes it when it stops.
	Firewall interface{ Close() error }
	// DrainWait leaves the running head's enrolled nodes this long to its
	// own loop, which drains them in Ray before it ends them (the down
	// marker; reconcile's drain.go), before they are ended from here; 0:
	// ended at once. Candidates not enrolled have no Ray to drain and are
	// ended at once either way.
	DrainWait time.Duration
	Timeout   time.Duration // default 5 min
	Poll      time.Duration // default 2 s
	Log       *slog.Logger
}

// Report says what Down did.
type Report struct {
	HeadRunning bool
	Ended       []string // candidates ended through the admin API
	Destroyed   []string // instances destroyed through the provider
}

// withDefaults fills in the defaults the fields' comments name.
func (cfg Config) withDefaults() Config {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Cluster == nil {
		cfg.Cluster = Socket(filepath.Join(cfg.StateDir, statedir.AdminSocket))
	}
	return cfg
}

// Down ends the cluster in its phases: leave the down marker, find the
// head, end every live candidate through it (and wait until it shows none
// live), destroy every rental the provider lists by label until none is
// left, and remove the firewall table of a stopped head.
func Down(ctx context.Context, cfg Config) (Report, error) {
	var rep Report
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := os.WriteFile(reconcile.DownFile(cfg.StateDir), []byte("head down\n"), 0o600); err != nil {
		return rep, fmt.Errorf("head down: write marker: %w", err)
	}
	cands, running, err := findHead(ctx, cfg)
	rep.HeadRunning = running
	if err != nil {
		return rep, err
	}
	// The head gets half the time to end its candidates; whatever it could
	// not end, the provider still destroys by label below.
	var endErr error
	endCtx, endCancel := context.WithTimeout(ctx, cfg.Timeout/2)
	defer endCancel()
	if rep.HeadRunning {
		rep.Ended, endErr = endThroughHead(endCtx, cfg, cands)
		if endErr != nil && cfg.Rentals == nil {
			return rep, endErr
		}
	}
	if cfg.Rentals != nil {
		if rep.HeadRunning && endErr == nil {
			// The running head destroys its ended candidates' rentals
			// itself; destroying them from here too would halve the pace
			// (the provider's API limits destroys per account, vast to one
			// per 3 s).
			waitHeadDestroys(endCtx, cfg)
		}
		if rep.Destroyed, err = destroyRentals(ctx, cfg); err != nil {
			return rep, err
		}
	}
	if cfg.Firewall != nil && !rep.HeadRunning {
		if err := cfg.Firewall.Close(); err != nil {
			return rep, fmt.Errorf("head down: firewall: %w", err)
		}
	}
	return rep, endErr
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
