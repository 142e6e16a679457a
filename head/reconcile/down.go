package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/internal/ctxsleep"
	"github.com/rayvast/rayvast/internal/wire"
)

// DownFileName is the marker `head down` leaves in the state dir: a running
// head's loop sees it, ends every candidate and rents nothing more.
const DownFileName = "down"

// DownFile is the marker's path in a state dir.
func DownFile(stateDir string) string { return filepath.Join(stateDir, DownFileName) }

// AdminSocketName is the admin socket in a state dir (SPEC §8).
const AdminSocketName = "admin.sock"

// DownConfig is what `head down` needs.
type DownConfig struct {
	StateDir string
	Admin    *Admin // default: the state dir's admin socket
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

// Down ends the cluster: it leaves the down marker, ends every live
// candidate through the admin API when the head runs (and waits until the
// head shows none live), destroys every rental the provider lists by label
// until none is left, and removes the firewall table of a stopped head.
func Down(ctx context.Context, cfg DownConfig) (DownReport, error) {
	var rep DownReport
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
		cfg.Admin = AdminSocket(filepath.Join(cfg.StateDir, AdminSocketName))
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := os.WriteFile(DownFile(cfg.StateDir), []byte("head down\n"), 0o600); err != nil {
		return rep, fmt.Errorf("head down: write marker: %w", err)
	}
	cands, err := cfg.Admin.Candidates(ctx)
	rep.HeadRunning = err == nil
	if err != nil {
		cfg.Log.Info("head down: the head is not running; ending rentals through the provider only", "err", err)
		if cfg.Rentals == nil {
			return rep, fmt.Errorf("head down: head not reachable (%v) and no provider to destroy rentals with", err)
		}
	}
	// The head gets half the time to end its candidates; whatever it could
	// not end, the provider still destroys by label below.
	var endErr error
	endCtx, endCancel := context.WithTimeout(ctx, cfg.Timeout/2)
	defer endCancel()
	for rep.HeadRunning {
		liveLeft := 0
		for _, c := range cands {
			if !liveState(c.State) {
				continue
			}
			liveLeft++
			if err := cfg.Admin.End(endCtx, c.CandidateID, ReasonDown); err != nil {
				cfg.Log.Warn("head down: end candidate", "candidate", c.CandidateID, "err", err)
				continue
			}
			rep.Ended = appendOnce(rep.Ended, c.CandidateID)
		}
		if liveLeft == 0 {
			break
		}
		if err := ctxsleep.Sleep(endCtx, cfg.Poll); err != nil {
			endErr = fmt.Errorf("head down: %d candidates still live: %w", liveLeft, err)
			if cfg.Rentals == nil {
				return rep, endErr
			}
			cfg.Log.Warn("head down: the head did not end every candidate; destroying the rentals through the provider", "live", liveLeft)
			break
		}
		if cands, err = cfg.Admin.Candidates(endCtx); err != nil {
			if endCtx.Err() != nil {
				// Out of time mid-request: still a failure to report,
				// not a head that stopped.
				endErr = fmt.Errorf("head down: %d candidates still live: %w", liveLeft, endCtx.Err())
				if cfg.Rentals == nil {
					return rep, endErr
				}
			}
			break // the head stopped meanwhile (or its time is up): the provider finishes the job
		}
	}
	if cfg.Rentals != nil && rep.HeadRunning && endErr == nil {
		// The running head destroys its ended candidates' rentals itself;
		// destroying them from here too would halve the pace (the
		// provider's API limits destroys per account, vast to one per 3 s).
		waitHeadDestroys(endCtx, cfg)
	}
	if cfg.Rentals != nil {
		for {
			rs, err := cfg.Rentals.List(ctx)
			if err != nil {
				return rep, fmt.Errorf("head down: list rentals: %w", err)
			}
			if len(rs) == 0 {
				break
			}
			for _, r := range rs {
				if err := cfg.Rentals.Destroy(ctx, r.InstanceID); err != nil {
					cfg.Log.Warn("head down: destroy", "instance", r.InstanceID, "err", err)
					continue
				}
				rep.Destroyed = appendOnce(rep.Destroyed, r.InstanceID)
			}
			if err := ctxsleep.Sleep(ctx, cfg.Poll); err != nil {
				return rep, fmt.Errorf("head down: rentals still listed: %w", err)
			}
		}
	}
	if cfg.Firewall != nil && !rep.HeadRunning {
		if err := cfg.Firewall.Close(); err != nil {
			return rep, fmt.Errorf("head down: firewall: %w", err)
		}
	}
	return rep, endErr
}

// stallPolls is how many polls the down process waits without a rental
// going away before it destroys the rest itself (10 s at the default 2 s:
// more than vast's 3 s between destroys).
const stallPolls = 5

// waitHeadDestroys lists the rentals until none is left, the head makes no
// progress for stallPolls polls, or ctx ends.
func waitHeadDestroys(ctx context.Context, cfg DownConfig) {
	last, still := -1, 0
	for {
		rs, err := cfg.Rentals.List(ctx)
		if err != nil || len(rs) == 0 {
			return
		}
		if len(rs) != last {
			last, still = len(rs), 0
		} else if still++; still >= stallPolls {
			cfg.Log.Warn("head down: the head destroys no more rentals; destroying them here", "left", len(rs))
			return
		}
		if ctxsleep.Sleep(ctx, cfg.Poll) != nil {
			return
		}
	}
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
