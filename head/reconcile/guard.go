package reconcile

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/internal/wire"
)

// GuardConfig is the firewall of a head whose rentals an external provider
// makes (provider none): no reconcile loop, only the firewall, opened to
// the candidates and nodes the head knows (their public_ip, from the admin
// API), as StartServe's loop opens it to its own.
type GuardConfig struct {
	Admin         *admin.Server
	StateDir      string
	FirewallTable string // default firewall.TableForStateDir(StateDir)
	Ports         []int  // A and B
	RayPorts      func() ([]int, error)
	Every         time.Duration // default 1 s, for the IPs and the Ray head's ports
	Nft           func(ctx context.Context, script string) error
	Log           *slog.Logger
}

// StartGuard opens the firewall table and keeps its allowed IPs equal to
// the live candidates' and nodes' public IPs (running or enrolled) and its
// Ray head ports to RayPorts. The returned stop ends it and removes the
// table.
func StartGuard(ctx context.Context, cfg GuardConfig) (stop func(), err error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.FirewallTable == "" {
		cfg.FirewallTable = firewall.TableForStateDir(cfg.StateDir)
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	fw, err := firewall.Open(ctx, firewall.Config{Table: cfg.FirewallTable, Ports: cfg.Ports, Nft: cfg.Nft, Log: cfg.Log.With("part", "firewall")})
	if err != nil {
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		syncEvery(loopCtx, cfg.Every, cfg.Log, "firewall", func() error { return fw.Sync(allowedIPs(cfg.Admin.Candidates())) })
	}()
	if cfg.RayPorts != nil {
		wg.Add(1)
		go func() { defer wg.Done(); guardRayPorts(loopCtx, fw, cfg.RayPorts, cfg.Every, cfg.Log) }()
	}
	return func() {
		cancel()
		wg.Wait()
		if err := fw.Close(); err != nil {
			cfg.Log.Warn("firewall", "err", err)
		}
	}, nil
}

// allowedIPs are the public IPs of the candidates that are running or
// enrolled, sorted, each once (syncFirewall's rule).
func allowedIPs(cands []wire.Candidate) []string {
	ips := []string{}
	seen := map[string]bool{}
	for _, c := range cands {
		if c.PublicIP != "" && !seen[c.PublicIP] && (c.State == wire.StateRunning || c.State == wire.StateEnrolled) {
			seen[c.PublicIP] = true
			ips = append(ips, c.PublicIP)
		}
	}
	sort.Strings(ips)
	return ips
}
