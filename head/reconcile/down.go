package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

// DownFileName is the marker `head down` leaves in the state dir: a running
// head's loop sees it, ends every candidate and rents nothing more.
const DownFileName = "down"

// DownFile is the marker's path in a state dir.
func DownFile(stateDir string) string { return filepath.Join(stateDir, DownFileName) }

// DownConfig is what `head down` needs.
type DownConfig struct {
	StateDir string
	Admin    *adminclient.Client // default: the state dir's admin socket
	// Rentals, when set, are listed and destroyed until none is left: the
	// guarantee that nothing stays rented, with or without a running head.
	Rentals Rentals
	// Firewall, when set, is closed (its table removed) at the end if no
	// head runs; a running head keeps its table (emptied: no live
	// candidate) and removes it when it stops.
	Firewall interface{ Close() error }
	Timeout  time.Duration // default 5 min
	Poll     time.Duration // default 2 s
	Log      *slog.Logger
}

// DownReport says what Down did.
type DownReport struct {
	HeadRunning bool
	Ended       []string // candidates ended through the admin API
	Destroyed   []string // instances destroyed through the provider
}

// withDefaults fills in the defaults the fields' comments name.
func (cfg DownConfig) withDefaults() DownConfig {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Admin == nil {
		cfg.Admin = adminclient.Unix(filepath.Join(cfg.StateDir, statedir.AdminSocket), 30*time.Second)
	}
	return cfg
}

// Down ends the cluster in its phases: leave the down marker, find the
// head, end every live candidate through it (and wait until it shows none
// live), destroy every rental the provider lists by label until none is
// left, and remove the firewall table of a stopped head.
func Down(ctx context.Context, cfg DownConfig) (DownReport, error) {
	var rep DownReport
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := os.WriteFile(DownFile(cfg.StateDir), []byte("head down\n"), 0o600); err != nil {
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

func liveState(s string) bool {
	switch s {
	case wire.StatePending, wire.StateRented, wire.StateRunning, wire.StateEnrolled, wire.StateLost:
		return true
	}
	return false
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
