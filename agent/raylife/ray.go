// Package raylife is Ray's life on the node under the restart policy
// (docs/protocol.md §9): it starts Ray, restarts it when it exits on its
// own, reports each exit and restart, and ends on a stop, a signal or a
// crash loop. Its status feeds heartbeats and the guest API: starting from
// each start of Ray until Ray says its node joined the cluster (join.go),
// then running. When the head names a new Ray head, Ray is restarted at
// once (head.go: Ray joined a Ray head that is gone). While the head
// drains the node before ending it, Ray that exits is not started again
// (drain.go).
package raylife

import (
	"context"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"github.com/rayvast/rayvast/agent/supervise"
	"github.com/rayvast/rayvast/internal/wire"
)

// Config is one node's Ray.
type Config struct {
	// Supervisor runs Ray; it is the process's only one (it reaps).
	Supervisor *supervise.Supervisor
	Policy     supervise.RestartPolicy // see Policy for the environment's
	// Command is a fresh Cmd for each start, same argv and env; joined is
	// to be called once Ray says its node is in the cluster (CopyOutput),
	// started after the Cmd is started.
	Command func(joined func()) (cmd *exec.Cmd, started func(), err error)
	// Report sends an event to the head: queued, in order, never blocking
	// long (Reports.Add).
	Report func(event, detail string)
	// LastWords, optional, is the end of Ray's output, for reports.
	LastWords func() string
	// Beat, optional, sends a heartbeat now and returns once its answer
	// is in (or ctx ends): asked when Ray exits on its own, so that the
	// head's drain notice (Drain) is known before a restart.
	Beat func(ctx context.Context)
	// JoinTimeout bounds a start's join; zero means DefaultJoinTimeout.
	JoinTimeout time.Duration
	Log         *slog.Logger
	Now         func() time.Time
}

// Ray is Ray on this node: New, then Start, then Run until it is gone.
type Ray struct {
	sup      *supervise.Supervisor
	command  func(joined func()) (*exec.Cmd, func(), error)
	restarts *supervise.Restarts
	report   func(event, detail string)
	beat     func(ctx context.Context)
	log      *slog.Logger
	now      func() time.Time

	mu     sync.Mutex
	status wire.RayStatus
	join   joinState     // join.go
	head   headState     // head.go
	drain  drainState    // drain.go
	final  chan struct{} // closed when the loop has decided to end
}

// New returns Ray under cfg; nothing runs until Start.
func New(cfg Config) *Ray {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	timeout := cfg.JoinTimeout
	if timeout <= 0 {
		timeout = DefaultJoinTimeout
	}
	return &Ray{sup: cfg.Supervisor, command: cfg.Command, restarts: supervise.NewRestarts(cfg.Policy), report: cfg.Report,
		beat: cfg.Beat, log: log, now: now, final: make(chan struct{}),
		join:   joinState{timeout: timeout, lastWords: cfg.LastWords},
		head:   headState{kick: make(chan struct{}, 1), back: make(chan struct{}, 1)},
		drain:  drainState{lifted: make(chan struct{}, 1)},
		status: wire.RayStatus{State: wire.RayStarting}}
}

// Status is what heartbeats and the guest API say of Ray.
func (r *Ray) Status() wire.RayStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.status
	if st.ExitCode != nil {
		c := *st.ExitCode
		st.ExitCode = &c
	}
	return st
}

// Final is closed once Ray is gone for good.
func (r *Ray) Final() <-chan struct{} { return r.final }

// Start starts Ray the first time.
func (r *Ray) Start() error {
	return r.launch(func(cmd *exec.Cmd) (int, error) {
		err := r.sup.Start(cmd)
		return r.sup.PID(), err
	})
}

// launch builds Ray's command for a new start and runs it through start,
// then records the start: starting, and the join bound armed.
func (r *Ray) launch(start func(*exec.Cmd) (int, error)) error {
	gen := r.nextGen()
	cmd, started, err := r.command(func() { r.joined(gen) })
	if err != nil {
		return err
	}
	pid, err := start(cmd)
	started()
	if err != nil {
		return err
	}
	n := r.restarts.Total()
	r.mu.Lock()
	r.join.liveGen, r.head.cycling = gen, ""
	r.status = wire.RayStatus{State: wire.RayStarting, PID: pid, Restarts: n}
	r.armJoin(gen)
	r.mu.Unlock()
	return nil
}
