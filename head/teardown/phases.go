package teardown

import (
	"context"
	"fmt"
	"time"

	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/internal/ctxsleep"
	"github.com/rayvast/rayvast/internal/wire"
)

// findHead lists the running head's candidates. running is false when no
// head answers; then only the provider can end the rentals, and without one
// that is an error.
func findHead(ctx context.Context, cfg Config) (cands []wire.Candidate, running bool, err error) {
	cands, err = cfg.Cluster.Candidates(ctx)
	if err == nil {
		return cands, true, nil
	}
	cfg.Log.Info("head down: the head is not running; ending rentals through the provider only", "err", err)
	if cfg.Rentals == nil {
		return nil, false, fmt.Errorf("head down: head not reachable (%v) and no provider to destroy rentals with", err)
	}
	return nil, false, nil
}

// endThroughHead ends every live candidate through the head until it shows
// none live, the head stops answering, or ctx ends. It returns the
// candidates it ended, and an error when some stayed live for lack of time.
func endThroughHead(ctx context.Context, cfg Config, cands []wire.Candidate) (ended []string, err error) {
	drainUntil := time.Now().Add(cfg.DrainWait)
	for {
		liveLeft := 0
		for _, c := range cands {
			if !wire.Live(c.State) {
				continue
			}
			liveLeft++
			if c.State == wire.StateEnrolled && time.Now().Before(drainUntil) {
				continue // the head's loop drains it in Ray first, then ends it
			}
			// Over the socket the head records the reason "deleted"; its
			// own loop, seeing the down marker, ends the rest as "down".
			if err := cfg.Cluster.End(ctx, c.CandidateID, reconcile.ReasonDown); err != nil {
				cfg.Log.Warn("head down: end candidate", "candidate", c.CandidateID, "err", err)
				continue
			}
			ended = appendOnce(ended, c.CandidateID)
		}
		if liveLeft == 0 {
			return ended, nil
		}
		if err := ctxsleep.Sleep(ctx, cfg.Poll); err != nil {
			if cfg.Rentals != nil {
				cfg.Log.Warn("head down: the head did not end every candidate; destroying the rentals through the provider", "live", liveLeft)
			}
			return ended, fmt.Errorf("head down: %d candidates still live: %w", liveLeft, err)
		}
		if cands, err = cfg.Cluster.Candidates(ctx); err != nil {
			if ctx.Err() != nil {
				// Out of time mid-request: still a failure to report,
				// not a head that stopped.
				return ended, fmt.Errorf("head down: %d candidates still live: %w", liveLeft, ctx.Err())
			}
			return ended, nil // the head stopped meanwhile: the provider finishes the job
		}
	}
}

// stallPolls is how many polls the down process waits without a rental
// going away before it destroys the rest itself (10 s at the default 2 s:
// more than vast's 3 s between destroys).
const stallPolls = 5

// waitHeadDestroys lists the rentals until none is left, the head makes no
// progress for stallPolls polls, or ctx ends.
func waitHeadDestroys(ctx context.Context, cfg Config) {
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

// destroyRentals destroys every rental the provider lists until none is
// left or ctx ends; it returns the instances it destroyed.
func destroyRentals(ctx context.Context, cfg Config) (destroyed []string, err error) {
	for {
		rs, err := cfg.Rentals.List(ctx)
		if err != nil {
			return destroyed, fmt.Errorf("head down: list rentals: %w", err)
		}
		if len(rs) == 0 {
			return destroyed, nil
		}
		for _, r := range rs {
			if err := cfg.Rentals.Destroy(ctx, r.InstanceID); err != nil {
				cfg.Log.Warn("head down: destroy", "instance", r.InstanceID, "err", err)
				continue
			}
			destroyed = appendOnce(destroyed, r.InstanceID)
		}
		if err := ctxsleep.Sleep(ctx, cfg.Poll); err != nil {
			return destroyed, fmt.Errorf("head down: rentals still listed: %w", err)
		}
	}
}
