// Package reconcile keeps the cluster at the size its owner asked for when
// the head rents instances itself (`--provider docker|vast`): per node type
// at least min_workers and at most max_workers enrolled or in-flight
// candidates, spares rented while candidates fail, candidates that do not
// enroll in time ended, lost nodes ended, rentals with no live candidate
// destroyed, the firewall opened only to live candidates' IPs, and at
// `head down` everything ended.
//
// It drives the head through the same calls an external provider makes on
// the admin API (Cluster), so a candidate it creates is made exactly like one
// an autoscaler creates.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"time"

	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/rentals"
	"github.com/rayvast/rayvast/internal/wire"
)

// Cluster is the head as the admin API shows it.
type Cluster interface {
	Candidates(ctx context.Context) ([]wire.Candidate, error)
	// Create makes a candidate of a node type (POST /v1/candidates); the
	// head's built-in provider rents its instance.
	Create(ctx context.Context, nodeType string) (wire.Candidate, error)
	// End ends a candidate (DELETE /v1/candidates/{id}); its instance is
	// destroyed by the built-in provider.
	End(ctx context.Context, candidateID, reason string) error
}

// Rentals is what the loop reads of the provider to find leaks
// (provider.Provider satisfies it).
type Rentals interface {
	List(ctx context.Context) ([]provider.Rental, error)
	Destroy(ctx context.Context, instanceID string) error
}

// Firewall opens ports A and B to exactly the given IPs.
type Firewall interface {
	Sync(ips []string) error
}

// Reasons the loop gives when it ends a candidate.
const (
	ReasonEnrollTimeout = "enroll_timeout"
	ReasonLost          = "lost"
	ReasonScaleDown     = "scale_down"
	ReasonDown          = "down"
	ReasonSpareUnneeded = "spare_unneeded"
)

// notFailures are end reasons that say nothing bad about renting (no_slot:
// a healthy candidate that came when every slot was taken).
var notFailures = map[string]bool{"": true, "deleted": true, ReasonDown: true, ReasonScaleDown: true, ReasonSpareUnneeded: true,
	wire.ReasonNoSlot: true, rentals.ReasonOverBudget: true}

// Config builds a Loop.
type Config struct {
	Cluster   Cluster
	Rentals   Rentals  // nil: no leak sweep
	Firewall  Firewall // nil: no firewall
	NodeTypes map[string]wire.NodeType
	// EnrollTimeout ends a candidate not enrolled this long after it was
	// created (default 15 min: image pull, bootloader retries, checks).
	EnrollTimeout time.Duration
	// Spares is how many candidates beyond the deficit are rented for a
	// node type below min_workers once one of its candidates failed within
	// FailureWindow (defaults 1 and 30 min; Spares -1 = none).
	Spares        int
	FailureWindow time.Duration
	// MaxFailures bounds the failed candidates of one node type within
	// PauseWindow (defaults 10 and 2 h; MaxFailures -1 = no bound): past it
	// the loop rents nothing more of that type until failures age out of
	// the window, so a systematic failure (a wrong image that never
	// enrolls, a broken account) cannot rent paid instances forever. The
	// window is longer than the enroll timeout so slow failures count too.
	MaxFailures int
	PauseWindow time.Duration
	Every       time.Duration // tick period, default 5 s
	// SweepEvery spaces the leak sweeps (one List call at the provider),
	// default 30 s; at down every tick sweeps.
	SweepEvery time.Duration
	// MaxDPHTotal is the config's max_dph_total: no candidate is created
	// while the live rentals cost that much (the driver caps each rental
	// at what is left). 0 = no cap.
	MaxDPHTotal float64
	// DownFile, when it exists, means `head down`: end everything.
	DownFile string
	Now      func() time.Time
	Log      *slog.Logger
}

// Loop is the reconciler. Tick is not safe for concurrent use; Run calls it
// from one goroutine.
type Loop struct {
	cfg       Config
	spares    map[string]bool // candidates this loop rented as spares
	paused    map[string]bool // node types not rented: too many failures
	lastSweep time.Time
}

// New returns a Loop.
func New(cfg Config) *Loop {
	if cfg.EnrollTimeout <= 0 {
		cfg.EnrollTimeout = 15 * time.Minute
	}
	if cfg.Spares < 0 {
		cfg.Spares = 0
	} else if cfg.Spares == 0 {
		cfg.Spares = 1
	}
	if cfg.FailureWindow <= 0 {
		cfg.FailureWindow = 30 * time.Minute
	}
	if cfg.MaxFailures == 0 {
		cfg.MaxFailures = 10
	}
	if cfg.PauseWindow <= 0 {
		cfg.PauseWindow = 2 * time.Hour
	}
	if cfg.Every <= 0 {
		cfg.Every = 5 * time.Second
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Loop{cfg: cfg, spares: map[string]bool{}, paused: map[string]bool{}}
}

// Run ticks until ctx ends. A stale down marker of an earlier `head down` is
// removed first: serving again means the cluster is wanted again.
func (l *Loop) Run(ctx context.Context) {
	if l.cfg.DownFile != "" {
		if err := os.Remove(l.cfg.DownFile); err == nil {
			l.cfg.Log.Info("reconcile: removed the down marker of an earlier head down")
		}
	}
	t := time.NewTicker(l.cfg.Every)
	defer t.Stop()
	for {
		if _, err := l.Tick(ctx); err != nil && ctx.Err() == nil {
			l.cfg.Log.Warn("reconcile", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Result says what one tick did.
type Result struct {
	Created   map[string]int    // node type → candidates created
	Ended     map[string]string // candidate → reason
	Destroyed []string          // instance IDs of leaked rentals
	Allowed   []string          // the firewall's IPs
	Down      bool
}

// Tick runs one pass and returns what it did; errors of single calls are
// joined and the pass goes on.
func (l *Loop) Tick(ctx context.Context) (Result, error) {
	res := Result{Created: map[string]int{}, Ended: map[string]string{}}
	var errs []error
	down := l.cfg.DownFile != "" && exists(l.cfg.DownFile)
	res.Down = down

	// Rentals first, candidates second: a candidate is made before its
	// rental, so every rental found has its candidate in the later list.
	var rentals []provider.Rental
	if now := l.cfg.Now(); l.cfg.Rentals != nil && (down || l.lastSweep.IsZero() || now.Sub(l.lastSweep) >= l.cfg.SweepEvery) {
		l.lastSweep = now
		var err error
		if rentals, err = l.cfg.Rentals.List(ctx); err != nil {
			errs = append(errs, err)
			rentals = nil
		}
	}
	cands, err := l.cfg.Cluster.Candidates(ctx)
	if err != nil {
		return res, fmt.Errorf("list candidates: %w", err)
	}
	now := l.cfg.Now()
	end := func(c wire.Candidate, reason string) {
		if err := l.cfg.Cluster.End(ctx, c.CandidateID, reason); err != nil {
			errs = append(errs, err)
			return
		}
		res.Ended[c.CandidateID] = reason
		l.cfg.Log.Info("reconcile: ended candidate", "candidate", c.CandidateID, "node_type", c.NodeType, "state", c.State, "reason", reason)
	}

	types := map[string]*tally{}
	for n := range l.cfg.NodeTypes {
		types[n] = &tally{}
	}
	live := map[string]wire.Candidate{}
	for _, c := range cands {
		t := types[c.NodeType]
		if t == nil {
			t = &tally{} // a node type no longer configured: ended below if down
		}
		switch c.State {
		case wire.StateLost:
			end(c, ReasonLost)
			t.failed++
			t.failLong(ReasonLost)
		case wire.StatePending, wire.StateRented, wire.StateRunning:
			switch {
			case down:
				end(c, ReasonDown)
			case now.Sub(c.CreatedAt) > l.cfg.EnrollTimeout:
				end(c, ReasonEnrollTimeout)
				t.failed++
				t.failLong(ReasonEnrollTimeout)
			default:
				t.inflight = append(t.inflight, c)
				live[c.CandidateID] = c
			}
		case wire.StateEnrolled:
			if down {
				end(c, ReasonDown)
			} else {
				t.enrolled++
				live[c.CandidateID] = c
			}
		case wire.StateEnded:
			if !notFailures[c.Reason] && now.Sub(c.UpdatedAt) < l.cfg.FailureWindow {
				t.failed++
			}
			if !notFailures[c.Reason] && now.Sub(c.UpdatedAt) < l.cfg.PauseWindow {
				t.failLong(c.Reason) // ray_version included: a wrong image fails every rental alike
			}
		}
	}

	for id := range l.spares {
		if c, ok := live[id]; !ok || c.State == wire.StateEnrolled {
			delete(l.spares, id) // enrolled or gone: no longer a spare to cancel
		}
	}

	if !down {
		names := make([]string, 0, len(types))
		for n := range l.cfg.NodeTypes {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			nt, t := l.cfg.NodeTypes[n], types[n]
			spare := 0
			if t.failed > 0 && t.enrolled < nt.MinWorkers {
				spare = l.cfg.Spares
			}
			deficit := max(nt.MinWorkers-t.enrolled, 0)
			want := deficit + spare // in flight
			if want > 0 {
				want = min(want, nt.MaxWorkers-t.enrolled+spare)
			}
			// A spare this loop rented that is no longer needed (the deficit
			// is met) is ended before it enrolls, newest first.
			for i := len(t.inflight) - 1; i >= 0 && len(t.inflight) > want; i-- {
				if c := t.inflight[i]; l.spares[c.CandidateID] {
					t.inflight = append(t.inflight[:i], t.inflight[i+1:]...)
					delete(live, c.CandidateID)
					end(c, ReasonSpareUnneeded)
				}
			}
			if l.pause(n, t.failedLong, t.reasons) {
				want = 0 // in-flight candidates are kept: one may be the one that works
			}
			if l.atBudget(cands) {
				want = 0
			}
			for i := len(t.inflight); i < want; i++ {
				c, err := l.cfg.Cluster.Create(ctx, n)
				if err != nil {
					errs = append(errs, fmt.Errorf("create %s candidate: %w", n, err))
					break
				}
				res.Created[n]++
				live[c.CandidateID] = c
				if i >= deficit {
					l.spares[c.CandidateID] = true
				}
				l.cfg.Log.Info("reconcile: created candidate", "candidate", c.CandidateID, "node_type", n,
					"enrolled", t.enrolled, "in_flight", len(t.inflight), "min", nt.MinWorkers, "max", nt.MaxWorkers, "spare", spare)
			}
			// Above max (min lowered, or an external creator): end the
			// newest in-flight candidates, never an enrolled node.
			for excess := t.enrolled + len(t.inflight) - (nt.MaxWorkers + spare); excess > 0 && len(t.inflight) > 0; excess-- {
				c := t.inflight[len(t.inflight)-1]
				t.inflight = t.inflight[:len(t.inflight)-1]
				delete(live, c.CandidateID)
				end(c, ReasonScaleDown)
			}
		}
	}

	// Leaks: a rental whose candidate is not live, or a second rental of a
	// live candidate whose instance is recorded (a create the provider ran
	// twice). A rental of a candidate not yet patched with its instance ID
	// (Rent just returned) is kept. Down: every rental.
	for _, r := range rentals {
		if c, ok := live[r.CandidateID]; ok && !down && (c.InstanceID == "" || c.InstanceID == r.InstanceID) {
			continue
		}
		if err := l.cfg.Rentals.Destroy(ctx, r.InstanceID); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Destroyed = append(res.Destroyed, r.InstanceID)
		l.cfg.Log.Info("reconcile: destroyed a rental with no live candidate", "instance", r.InstanceID, "candidate", r.CandidateID, "down", down)
	}

	if l.cfg.Firewall != nil {
		ips := []string{}
		seen := map[string]bool{}
		for _, c := range live {
			if c.PublicIP != "" && !seen[c.PublicIP] && (c.State == wire.StateRunning || c.State == wire.StateEnrolled) {
				seen[c.PublicIP] = true
				ips = append(ips, c.PublicIP)
			}
		}
		sort.Strings(ips)
		if err := l.cfg.Firewall.Sync(ips); err != nil {
			errs = append(errs, fmt.Errorf("firewall: %w", err))
		}
		res.Allowed = ips
	}
	return res, errors.Join(errs...)
}

// atBudget reports whether the live rentals cost max_dph_total already.
func (l *Loop) atBudget(cands []wire.Candidate) bool {
	return l.cfg.MaxDPHTotal > 0 && metrics.LiveDPH(cands) >= l.cfg.MaxDPHTotal-0.0005
}

// pause reports whether renting of node type n is paused for failed
// failures within the window, and logs when a pause starts or ends.
func (l *Loop) pause(n string, failed int, reasons map[string]int) bool {
	stop := l.cfg.MaxFailures > 0 && failed >= l.cfg.MaxFailures
	switch {
	case stop && !l.paused[n]:
		msg := "reconcile: renting paused: too many failed candidates; check the image, the account and the node type, or wait for the window to pass"
		if reasons[wire.ReasonRayVersion] > 0 {
			msg = "reconcile: renting paused: too many failed candidates; ray_version: the node image's Ray or Python is not the cluster's (config ray.version, ray.python_version; Ray 2.52 or newer)"
		}
		l.cfg.Log.Warn(msg, "node_type", n, "failures", failed, "reasons", reasonList(reasons),
			"max_failures", l.cfg.MaxFailures, "window", l.cfg.PauseWindow.String())
	case !stop && l.paused[n]:
		l.cfg.Log.Info("reconcile: renting resumed", "node_type", n, "failures", failed, "max_failures", l.cfg.MaxFailures)
	}
	if stop {
		l.paused[n] = true
	} else {
		delete(l.paused, n)
	}
	return stop
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
