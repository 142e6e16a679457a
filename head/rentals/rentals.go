// Package rentals drives the built-in provider (docs/protocol.md §8): it rents an
// instance for each new candidate, follows it until it has a public IP, and
// ends instances the head destroys. With no provider ("none") a candidate
// the head must destroy is only marked destroy_requested, for the external
// provider to end through the admin API.
package rentals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/wire"
)

// Config builds a Driver.
type Config struct {
	Provider  provider.Provider // nil: an external provider drives the admin API
	Registry  *registry.Registry
	Blocklist *blocklist.List
	NodeTypes map[string]wire.NodeType
	Command   string        // the rental's command: bootloader.sh's text
	PollEvery time.Duration // how often to ask for a public IP; default 2 s
	// MaxDPHTotal caps the $/hour of every live rental, spares included
	// (the config's max_dph_total); 0 = no cap. Rents run one at a time
	// under a cap, each capped at what the others leave.
	MaxDPHTotal float64
	Log         *slog.Logger
}

// ReasonOverBudget ends a candidate whose rental would take the cluster
// over max_dph_total.
const ReasonOverBudget = "over_budget"

// Driver is safe for concurrent use.
type Driver struct {
	cfg    Config
	budget sync.Mutex // held by a Rent under MaxDPHTotal until its price is recorded
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Driver; its goroutines end with Close.
func New(cfg Config) *Driver {
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Driver{cfg: cfg, ctx: ctx, cancel: cancel}
}

// ProviderStatus is the provider's own account of itself (why it rents
// nothing now, if it does not); kind "none" without a built-in provider.
func (d *Driver) ProviderStatus() wire.ProviderStatus {
	switch p := d.cfg.Provider.(type) {
	case nil:
		return wire.ProviderStatus{Kind: wire.ProviderNone}
	case provider.Statuser:
		return p.Status()
	default:
		return wire.ProviderStatus{Kind: p.Name()}
	}
}

// Builtin reports whether the head rents instances itself.
func (d *Driver) Builtin() bool { return d.cfg.Provider != nil }

// Close stops following rentals and waits for in-flight provider calls. It
// does not destroy instances.
func (d *Driver) Close() {
	d.cancel()
	d.wg.Wait()
}

func (d *Driver) goDo(f func()) {
	d.wg.Add(1)
	go func() { defer d.wg.Done(); f() }()
}

// Rent rents an instance for a new candidate, in the background. env is the
// rental's environment, join token included.
func (d *Driver) Rent(c wire.Candidate, env map[string]string) {
	if d.cfg.Provider == nil {
		return
	}
	d.goDo(func() { d.rent(c, env) })
}

func (d *Driver) rent(c wire.Candidate, env map[string]string) {
	log := d.cfg.Log.With("candidate", c.CandidateID)
	left := 0.0
	if d.cfg.MaxDPHTotal > 0 {
		d.budget.Lock()
		defer d.budget.Unlock()
		left = d.cfg.MaxDPHTotal - metrics.LiveDPH(d.cfg.Registry.Candidates())
		if left < 0.0005 {
			log.Warn("not renting: the cluster is at its budget", "max_dph_total", d.cfg.MaxDPHTotal, "left_dph", left)
			d.cfg.Registry.End(c.CandidateID, ReasonOverBudget)
			return
		}
	}
	r, err := d.cfg.Provider.Rent(d.ctx, provider.RentRequest{
		CandidateID: c.CandidateID, NodeType: c.NodeType, GPUs: d.cfg.NodeTypes[c.NodeType].GPUs,
		Env: env, Command: d.cfg.Command, MaxDPH: left,
	})
	if err != nil {
		// A provider's error may quote the request (an API echoing a bad
		// field): the join token must not reach the log.
		log.Error("rent failed", "err", redact(err.Error(), env[wire.EnvJoinToken]))
		d.cfg.Registry.End(c.CandidateID, "rent_failed")
		return
	}
	log = log.With("instance", r.InstanceID, "host", r.HostID, "dph_total", r.DPHTotal)
	log.Info("rented")
	if _, err := d.cfg.Registry.Patch(c.CandidateID, wire.CandidatePatch{InstanceID: r.InstanceID, HostID: r.HostID, DPHTotal: r.DPHTotal}); err != nil {
		// Ended meanwhile (DELETE during Rent): end the rental too.
		log.Warn("candidate gone while renting", "err", err)
		d.destroyInstance(r.InstanceID, log)
		return
	}
	if d.cfg.MaxDPHTotal > 0 && r.DPHTotal > left+1e-9 {
		// The provider did not honour the cap: the rental must not stay.
		log.Error("rental over the budget left; destroying it", "left_dph", left)
		d.End(c.CandidateID, ReasonOverBudget)
		return
	}
	if e, bad := d.cfg.Blocklist.Blocked(r.HostID); bad {
		log.Warn("rented on a blocklisted host", "class", e.Class)
		d.Destroy(c.CandidateID, "host_blocklisted")
		return
	}
	d.goDo(func() { d.follow(c.CandidateID, r, log) })
}

// follow polls the provider until the rental has a public IP.
func (d *Driver) follow(id string, r provider.Rental, log *slog.Logger) {
	t := time.NewTicker(d.cfg.PollEvery)
	defer t.Stop()
	for r.PublicIP == "" || !r.Running {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
		c, ok := d.cfg.Registry.Candidate(id)
		if !ok || c.State == wire.StateEnded || c.State == wire.StateDestroyRequested {
			return
		}
		got, err := d.cfg.Provider.Get(d.ctx, r.InstanceID)
		if errors.Is(err, provider.ErrGone) {
			log.Warn("instance gone before it ran")
			d.cfg.Registry.End(id, "instance_gone")
			return
		}
		if err != nil {
			log.Warn("get rental", "err", err)
			continue
		}
		r = got
	}
	if _, err := d.cfg.Registry.Patch(id, wire.CandidatePatch{PublicIP: r.PublicIP}); err != nil {
		log.Warn("record public ip", "err", err)
		return
	}
	log.Info("running", "public_ip", r.PublicIP)
}

// Destroy ends a candidate the head gave up on (decision steps 4–8, lost):
// through the provider, or as destroy_requested for an external one.
func (d *Driver) Destroy(candidateID, reason string) {
	if d.cfg.Provider == nil {
		if _, err := d.cfg.Registry.RequestDestroy(candidateID, reason); err != nil {
			d.cfg.Log.Error("request destroy", "candidate", candidateID, "err", err)
		}
		return
	}
	d.End(candidateID, reason)
}

// End ends a candidate now (DELETE, or Destroy with a provider): the token
// dies and heartbeats are refused; the instance is destroyed in the
// background when a provider is built in.
func (d *Driver) End(candidateID, reason string) (wire.Candidate, error) {
	c, err := d.cfg.Registry.End(candidateID, reason)
	if err != nil {
		return c, err
	}
	if d.cfg.Provider != nil && c.InstanceID != "" {
		log := d.cfg.Log.With("candidate", candidateID, "instance", c.InstanceID)
		d.goDo(func() { d.destroyInstance(c.InstanceID, log) })
	}
	return c, nil
}

// destroyTimeout bounds one destroy, queueing included: vast takes one
// destroy per 3 s per account, so ending 50 candidates at once keeps the
// last one waiting 2.5 min.
const destroyTimeout = 5 * time.Minute

func (d *Driver) destroyInstance(instanceID string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), destroyTimeout)
	defer cancel()
	if err := d.cfg.Provider.Destroy(ctx, instanceID); err != nil {
		log.Error("destroy instance", "err", err)
		return
	}
	log.Info("instance destroyed")
}

// Reattach runs once at start with a built-in provider: it follows rentals
// that are not running yet, destroys rentals whose candidate ended or is
// unknown, and ends candidates that were never rented (their token, needed
// to rent, did not survive the restart).
func (d *Driver) Reattach(ctx context.Context) error {
	if d.cfg.Provider == nil {
		return nil
	}
	rentals, err := d.cfg.Provider.List(ctx)
	if err != nil {
		return fmt.Errorf("list rentals: %w", err)
	}
	seen := map[string]bool{}
	for _, r := range rentals {
		log := d.cfg.Log.With("candidate", r.CandidateID, "instance", r.InstanceID)
		c, ok := d.cfg.Registry.Candidate(r.CandidateID)
		if ok {
			seen[c.CandidateID] = true
		}
		switch {
		case !ok || c.State == wire.StateEnded:
			log.Info("destroying a rental with no live candidate")
			d.goDo(func() { d.destroyInstance(r.InstanceID, log) })
		case c.State == wire.StateDestroyRequested:
			d.End(c.CandidateID, c.Reason)
		case c.InstanceID != "" && c.InstanceID != r.InstanceID:
			// A second rental of one candidate (a create run twice): only
			// the recorded one is the candidate's.
			log.Warn("destroying a second rental of a candidate", "recorded_instance", c.InstanceID)
			d.goDo(func() { d.destroyInstance(r.InstanceID, log) })
		case c.State == wire.StatePending || c.State == wire.StateRented:
			d.cfg.Registry.Patch(c.CandidateID, wire.CandidatePatch{InstanceID: r.InstanceID, HostID: r.HostID, DPHTotal: r.DPHTotal})
			d.goDo(func() { d.follow(c.CandidateID, r, log) })
		}
	}
	for _, c := range d.cfg.Registry.Candidates() {
		if seen[c.CandidateID] {
			continue
		}
		switch c.State {
		case wire.StatePending:
			d.cfg.Registry.End(c.CandidateID, "not_rented_before_restart")
		case wire.StateRented, wire.StateRunning:
			d.cfg.Registry.End(c.CandidateID, "instance_gone")
		case wire.StateDestroyRequested:
			d.End(c.CandidateID, c.Reason)
		}
	}
	return nil
}

func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[join token]")
}
