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
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/rentals"
	"github.com/rayvast/rayvast/internal/ctxsleep"
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

// Repricer is a Cluster that can record a live candidate's new $/hour
// (InProcess): a rental whose price rose (an accepted price increase) is
// repriced at a sweep, so max_dph_total counts what it costs now.
type Repricer interface {
	Reprice(ctx context.Context, candidateID string, dph float64) error
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
	// ReasonHostVanished: the provider shows the instance exited, offline,
	// unknown or stopped after it ran (the reason names which) and gives
	// no EndNow (vast's stops on purpose do); its host is blocklisted
	// network.
	ReasonHostVanished = "host_vanished"
	// ReasonInstanceExited: a candidate's container exited before it
	// enrolled (the image or the bootloader may be at fault: no blocklist).
	ReasonInstanceExited = "instance_exited"
	// ReasonMachineShared: another rental of the account holds the same
	// machine (another head's, perhaps) and keeps it.
	ReasonMachineShared = "machine_shared"
	// ReasonContractEnd: the rental's contract ends within ReplaceBefore
	// and its replacement enrolled (contracts.go).
	ReasonContractEnd = "contract_end"
	// Reasons a provider gives in Rental.EndNow (head/provider/vast):
	// outbid (a paused bid: counts as a failure, so endless outbids pause
	// the node type), contract_ended (stopped at its end date) and
	// price_increase (the host's new price is above the cap). No host is
	// blocklisted for them.
	ReasonOutbid        = "outbid"
	ReasonContractEnded = "contract_ended"
	ReasonPriceIncrease = "price_increase"
	// ReasonStopped and ReasonNoBalance: vast stopped an on-demand rental
	// (vast never interrupts on-demand): on purpose (a user's stop), or
	// because the account has no money left (renting then halts). Neither
	// is the host's fault nor a failure.
	ReasonStopped   = "stopped"
	ReasonNoBalance = "no_balance"
)

// Blocklist is what the loop adds hosts to (head/blocklist.List).
type Blocklist interface {
	Add(hostID, class, reason string) wire.BlockEntry
}

// notFailures are end reasons that say nothing bad about renting (no_slot:
// a healthy candidate that came when every slot was taken).
var notFailures = map[string]bool{"": true, "deleted": true, ReasonDown: true, ReasonScaleDown: true, ReasonSpareUnneeded: true,
	wire.ReasonNoSlot: true, rentals.ReasonOverBudget: true, ReasonMachineShared: true,
	ReasonContractEnd: true, ReasonContractEnded: true, ReasonPriceIncrease: true, ReasonStopped: true, ReasonNoBalance: true}

// Config builds a Loop.
type Config struct {
	Cluster  Cluster
	Rentals  Rentals  // nil: no leak sweep
	Firewall Firewall // nil: no firewall
	// Blocklist takes the hosts of rentals that vanished (nil: none).
	Blocklist Blocklist
	// Status says why the provider rents nothing now, if it does not
	// (nil: it always rents); the loop then creates no candidate.
	Status    func() wire.ProviderStatus
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
	// default 30 s; at down every tick sweeps. The head sets it to Every
	// when a node type rents interruptible: an outbid pause then ends
	// within one tick.
	SweepEvery time.Duration
	// ReplaceBefore: an enrolled node whose rental's contract ends
	// (Rental.EndsAt) within this long gets a replacement, and is ended
	// once that enrolled (contracts.go); 0 = none.
	ReplaceBefore time.Duration
	// MaxDPHTotal is the config's max_dph_total: no candidate is created
	// while the live rentals cost that much (the driver caps each rental
	// at what is left). 0 = no cap.
	MaxDPHTotal float64
	// RayScales: Ray's autoscaler decides how many nodes of each type run
	// (the config's autoscaler block). The loop then creates nothing to
	// reach min_workers and ends nothing above max_workers; it still ends
	// lost and late candidates and replaces each failed one with a spare
	// (Spares -1: none), see rayscales.go.
	RayScales bool
	// Pauses, when set, is where the loop records paused node types for
	// others to read (the admin API, with RayScales).
	Pauses *Pauses
	// DownFile, when it exists, means `head down`: end everything.
	DownFile string
	// Drainer, when set, drains an enrolled node in Ray before a planned
	// end (`head down`, a contract's end) for up to DrainDeadline
	// (default DefaultDrainDeadline); drain.go.
	Drainer       Drainer
	DrainDeadline time.Duration
	// Drains, when set, is where the loop records the nodes it drains,
	// for port B to tell them (wire.DrainNotice).
	Drains *Drains
	Now    func() time.Time
	Log    *slog.Logger
}

// Loop is the reconciler. Tick is not safe for concurrent use; Run calls it
// from one goroutine.
type Loop struct {
	cfg       Config
	spares    map[string]bool // candidates this loop rented as spares
	paused    map[string]bool // node types not rented: too many failures
	halted    string          // the provider's halt the loop last logged
	lastSweep time.Time
	started   time.Time       // RayScales: failures before it are not replaced
	replaced  map[string]bool // RayScales: failed candidates already replaced
	// contracts.go: end dates by candidate (from the last sweep), and
	// the replacements of nodes whose contract ends soon.
	ends        map[string]time.Time
	replacing   map[string]string      // node's candidate → its replacement's
	replacement map[string]bool        // candidates that replace such a node
	drains      map[string]*drainState // drain.go: nodes drained before a planned end
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
	if cfg.DrainDeadline <= 0 {
		cfg.DrainDeadline = DefaultDrainDeadline
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Loop{cfg: cfg, spares: map[string]bool{}, paused: map[string]bool{}, started: cfg.Now(), replaced: map[string]bool{},
		ends: map[string]time.Time{}, replacing: map[string]string{}, replacement: map[string]bool{}, drains: map[string]*drainState{}}
}

// Run ticks until ctx ends. A stale down marker of an earlier `head down` is
// removed first: serving again means the cluster is wanted again.
func (l *Loop) Run(ctx context.Context) {
	if l.cfg.DownFile != "" {
		if err := os.Remove(l.cfg.DownFile); err == nil {
			l.cfg.Log.Info("reconcile: removed the down marker of an earlier head down")
		}
	}
	tick := func() {
		if _, err := l.Tick(ctx); err != nil && ctx.Err() == nil {
			l.cfg.Log.Warn("reconcile", "err", err)
		}
	}
	tick()
	ctxsleep.Every(ctx, l.cfg.Every, tick)
}

// Result says what one tick did.
type Result struct {
	Created   map[string]int    // node type → candidates created
	Ended     map[string]string // candidate → reason
	Destroyed []string          // instance IDs of leaked rentals
	Allowed   []string          // the firewall's IPs
	Down      bool
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
	if l.cfg.Pauses != nil {
		l.cfg.Pauses.set(n, stop)
	}
	return stop
}

// providerHalted reports whether the provider rents nothing now, and logs
// when that starts or ends.
func (l *Loop) providerHalted() bool {
	var st wire.ProviderStatus
	if l.cfg.Status != nil {
		st = l.cfg.Status()
	}
	switch {
	case st.Halted != "" && st.Halted != l.halted:
		until := "until fixed"
		if st.Until != nil {
			until = "until " + st.Until.UTC().Format(time.RFC3339)
		}
		l.cfg.Log.Warn("reconcile: renting halted by the provider; no candidate is created "+until, "reason", st.Halted, "detail", st.Detail)
	case st.Halted == "" && l.halted != "":
		l.cfg.Log.Info("reconcile: the provider rents again", "after", l.halted)
	}
	l.halted = st.Halted
	return st.Halted != ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// DownFileName is the marker `head down` (head/teardown) leaves in the state
// dir: a running head's loop sees it, ends every candidate and rents
// nothing more.
const DownFileName = "down"

// DownFile is the marker's path in a state dir.
func DownFile(stateDir string) string { return filepath.Join(stateDir, DownFileName) }
