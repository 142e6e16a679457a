// Package hostcheck runs the agent's host checks before enrollment (docs/protocol.md §5):
// capabilities, network namespace, /dev/shm, egress IP, the GPU count and
// models, and (ProbeRay) the found Python's Ray and Python versions.
// Each check is one small file; every host path is built from Config.Root so
// tests run the checks against fake /proc, /dev and /sys trees.
package hostcheck

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// DefaultTimeout bounds each egress DNS query when Config.Timeout is zero.
const DefaultTimeout = 3 * time.Second

// Config says where and how to check.
type Config struct {
	// Root is the host root the paths are built from; "" means "/". With a
	// root other than "/" only files under it are read: no live syscalls
	// about the calling process (capget, netns handles).
	Root string
	// PublicIP is the IP vast (or RAYVAST_PUBLIC_IP) says the container has.
	PublicIP string
	// Resolvers are asked "who am I". Empty fails the egress check: the
	// caller passes DefaultResolvers explicitly in production, so a test can
	// never reach the public resolvers by accident.
	Resolvers []Resolver
	// Timeout bounds each DNS query; zero means DefaultTimeout.
	Timeout time.Duration
	Log     *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Root == "" {
		c.Root = "/"
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// live reports whether the checks look at the calling process itself, so the
// syscall-based second sources (capget, netns handles) apply.
func (c Config) live() bool { return filepath.Clean(c.Root) == "/" }

// path joins the root and a host path like "/proc/self/status".
func (c Config) path(p string) string { return filepath.Join(c.Root, p) }

// probes are the checks Run walks, in report order, each filling its part
// of the report (the checks' names are wire.Checks'; see its List).
var probes = []func(ctx context.Context, cfg Config, r *wire.CheckReport){
	func(_ context.Context, cfg Config, r *wire.CheckReport) {
		r.Checks.Capabilities = checkCapabilities(cfg)
	},
	func(_ context.Context, cfg Config, r *wire.CheckReport) { r.Checks.Netns = checkNetns(cfg) },
	func(_ context.Context, cfg Config, r *wire.CheckReport) { r.Checks.Shm = checkShm(cfg) },
	func(ctx context.Context, cfg Config, r *wire.CheckReport) { r.Checks.Egress = checkEgress(ctx, cfg) },
	func(_ context.Context, cfg Config, r *wire.CheckReport) {
		r.GPUs, r.GPUModels = countGPUs(cfg), gpuModels(cfg)
	},
}

// Run runs every check and returns the report `agent check` prints and
// POST /enroll carries. It never fails as a whole: a check that cannot
// look fails itself with a detail saying why.
func Run(ctx context.Context, cfg Config) wire.CheckReport {
	cfg = cfg.withDefaults()
	var r wire.CheckReport
	for _, run := range probes {
		run(ctx, cfg, &r)
	}
	var summary []any
	for _, ch := range r.Checks.List() {
		summary = append(summary, ch.Name, ch.OK)
	}
	summary = append(summary, "egress_ip", r.Checks.Egress.IP, "gpus", r.GPUs, "gpu_models", r.GPUModels)
	cfg.Log.Info("host checks", summary...)
	for _, ch := range r.Checks.Failed(false) {
		cfg.Log.Warn("host check failed", "check", ch.Name, "detail", ch.Detail)
	}
	return r
}

func pass(detail string) wire.Check { return wire.Check{OK: true, Detail: detail} }
func fail(detail string) wire.Check { return wire.Check{OK: false, Detail: detail} }
