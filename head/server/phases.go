package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/rayvast/rayvast"
	"github.com/rayvast/rayvast/head/acceptpace"
	"github.com/rayvast/rayvast/head/admin"
	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/checkgate"
	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/enroll"
	"github.com/rayvast/rayvast/head/healthpoll"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/nodeapi"
	"github.com/rayvast/rayvast/head/ratelimit"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/head/rentals"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

// inputs are what serve reads before it opens anything: the state dir, the
// agent binary it serves, the shim and the rental's command.
type inputs struct {
	st       *statedir.State
	agent    []byte
	agentSum [sha256.Size]byte
	shim     *wire.Shim
	command  string
	cluster  string
}

func loadInputs(f Config, cfg *config.Config, log *slog.Logger) (*inputs, error) {
	st := f.State
	if st == nil {
		return nil, errors.New("server: no state dir")
	}
	in := &inputs{st: st, command: rayvast.Bootloader()}
	var err error
	if in.agent, err = loadAgent(f.Agent); err != nil {
		return nil, err
	}
	in.agentSum = sha256.Sum256(in.agent)
	if in.shim, err = loadShim(f.Shim, log); err != nil {
		return nil, err
	}
	if f.Bootloader != "" {
		b, err := os.ReadFile(f.Bootloader)
		if err != nil {
			return nil, fmt.Errorf("read bootloader: %w", err)
		}
		in.command = string(b)
	}
	in.cluster = cfg.Cluster
	if in.cluster == "" {
		in.cluster = st.Cluster
	} else if st.Cluster != "" && st.Cluster != in.cluster {
		// Rentals are found by a label naming the cluster: a renamed cluster
		// would no longer see, and so never end, the rentals it made.
		return nil, fmt.Errorf("config cluster %q differs from the state dir's %q (head init --cluster); rentals are labelled with it, keep one name", in.cluster, st.Cluster)
	}
	return in, nil
}

// listeners are ports A and B and the admin socket.
type listeners struct{ a, b, admin net.Listener }

// openListeners opens all three or none.
func openListeners(f Config, st *statedir.State) (*listeners, error) {
	ls := &listeners{}
	var err error
	if ls.a, err = net.Listen("tcp", f.ListenA); err != nil {
		return nil, fmt.Errorf("listen port A: %w", err)
	}
	if ls.b, err = net.Listen("tcp", f.ListenB); err != nil {
		ls.close()
		return nil, fmt.Errorf("listen port B: %w", err)
	}
	if ls.admin, err = admin.Listen(st.Path(statedir.AdminSocket)); err != nil {
		ls.close()
		return nil, err
	}
	if WrapAdmin != nil {
		ls.admin = WrapAdmin(ls.admin)
	}
	return ls, nil
}

// close closes what is open: for errors before the servers own them.
func (ls *listeners) close() {
	for _, l := range []net.Listener{ls.a, ls.b, ls.admin} {
		if l != nil {
			l.Close()
		}
	}
}

func (ls *listeners) portA() int { return ls.a.Addr().(*net.TCPAddr).Port }
func (ls *listeners) portB() int { return ls.b.Addr().(*net.TCPAddr).Port }

// parts are the head's three servers' handlers and what they share.
type parts struct {
	metrics *metrics.Metrics
	nodes   *nodeapi.Server
	enroll  *enroll.Server
	admin   *admin.Server
	checks  *checkgate.Gate
}

// A non-nil pauses refuses new candidates of paused node types (Ray's
// autoscaler owns the count).
func newParts(cfg *config.Config, in *inputs, reg *registry.Registry, block *blocklist.List, driver *rentals.Driver, ls *listeners,
	pauses *reconcile.Pauses, drains *reconcile.Drains, rayHead func() (string, bool), log *slog.Logger) *parts {
	st, portA, portB := in.st, ls.portA(), ls.portB()
	checks := checkgate.New(checkgate.Config{Max: maxPortChecks})
	m := &metrics.Metrics{PortChecks: func() (int, int, int) {
		st := checks.Stats()
		return st.Limit, st.InFlight, st.Waiting
	}}
	nodes := nodeapi.New(nodeapi.Config{Registry: reg, CA: st.CA.Pool(), Interval: cfg.HeartbeatInterval,
		Metrics: m, Destroy: driver.Destroy, RayHead: rayHead, Drain: drains.Of, Log: log.With("port", "B")})
	enr := enroll.New(enroll.Config{
		Registry: reg, Blocklist: block, Limiter: ratelimit.New(refusalBurst, refusalRefill, nil), PortCheck: gatedPortCheck(checks, maxCheckWait),
		CA: st.CA, NodeTypes: cfg.NodeTypes, Agent: in.agent, Destroy: driver.Destroy, Metrics: m,
		Log: log.With("port", "A"), Ray: cfg.Ray,
		Bundle: enroll.Bundle{ClusterToken: st.ClusterToken, AppID: st.AppID, AppRootKey: st.AppRootKey, Shim: in.shim,
			RayHeadAddress: cfg.Ray.HeadAddress, GuestAPI: cfg.GuestAPI, PortB: portB, IntervalS: nodes.IntervalS(),
			UnheardLimitS: int(cfg.UnheardLimit() / time.Second), SelfEnd: selfEnd(driver)},
	})
	var paused func(string) bool
	if pauses != nil {
		paused = pauses.Paused
	}
	adm := admin.New(admin.Config{Registry: reg, Blocklist: block, Rentals: driver, Provider: driver.ProviderStatus, NodeTypes: cfg.NodeTypes, Metrics: m,
		Paused: paused, Log: log.With("part", "admin"),
		Env: admin.Env{Head: st.HeadIP, PortA: portA, PortB: portB, BootstrapSHA256: hex.EncodeToString(in.agentSum[:]), CASHA256: st.CA.Fingerprint(),
			PublicLogs: cfg.PublicLogs}})
	return &parts{metrics: m, nodes: nodes, enroll: enr, admin: adm, checks: checks}
}

// Port A accepts at most portARate new connections a second, in bursts of
// portABurst (head/acceptpace): an enrollment storm's TLS handshakes are
// spread over seconds instead of starving port B's heartbeats. 250/s is
// about twice what this 2-core machine enrolls per second in a storm
// (tools/loadtest: 2,000 in 16 s), so the pace is not what holds a storm
// back here; it caps a storm of 2,000 at 8 s on any machine.
const (
	portARate  = 250
	portABurst = 64
)

// namedServer is one HTTP server on its listener.
type namedServer struct {
	name string
	srv  *http.Server
	ln   net.Listener
}

func httpServers(p *parts, ls *listeners, st *statedir.State, log *slog.Logger) []namedServer {
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	return []namedServer{
		{"port A", &http.Server{Handler: p.enroll.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
			// 3 min: /bootstrap is ~9 MB to a far-away rental; longer only lets a
			// stranger hold a connection.
			WriteTimeout: 3 * time.Minute, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10, ErrorLog: errLog,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{st.ServerCert}, MinVersion: tls.VersionTLS12}},
			acceptpace.New(ls.a, portARate, portABurst, nil, nil)},
		{"port B", &http.Server{Handler: p.nodes.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
			// Idle 90 s: long enough to keep a node's connection across 30 s
			// heartbeats, short enough that idle strangers do not pile up.
			WriteTimeout: 30 * time.Second, IdleTimeout: 90 * time.Second, MaxHeaderBytes: 16 << 10, ErrorLog: errLog,
			TLSConfig: p.nodes.TLSConfig(st.ServerCert)}, ls.b},
		{"admin", &http.Server{Handler: p.admin.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
			ErrorLog: errLog}, ls.admin},
	}
}

// startLoops starts the background loops (prune, lost, health, the port
// check gate); stop
// tells them to end, wait waits until they have.
func startLoops(reg *registry.Registry, retention time.Duration, p *parts, driver *rentals.Driver, cfg *config.Config, st *statedir.State, log *slog.Logger) (stop, wait func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Add(4)
	go func() { defer loops.Done(); p.checks.Run(ctx, checkgate.DefaultInterval) }()
	go func() { defer loops.Done(); pruneEnded(ctx, reg, retention, p.metrics, log) }()
	go func() { defer loops.Done(); p.nodes.WatchLost(ctx, driver.Destroy) }()
	go func() {
		defer loops.Done()
		p.nodes.PollHealth(ctx, healthpoll.New(healthpoll.Config{CA: st.CA.Pool()}), cfg.HealthFailureThreshold)
	}()
	return cancel, loops.Wait
}

// startServers serves each server on its listener; a server that fails
// sends its error.
func startServers(servers []namedServer) <-chan error {
	serveErr := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			var err error
			if s.srv.TLSConfig != nil {
				err = s.srv.ServeTLS(s.ln, "", "")
			} else {
				err = s.srv.Serve(s.ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("%s: %w", s.name, err)
			}
		}()
	}
	return serveErr
}

// shutdownWhenDone waits until ctx ends or a server fails, then calls
// stopLoops and shuts the servers down within shutdownGrace, finishing
// in-flight requests. It returns the server's failure, if one failed.
func shutdownWhenDone(ctx context.Context, serveErr <-chan error, servers []namedServer, stopLoops func(), log *slog.Logger) error {
	var runErr error
	select {
	case <-ctx.Done():
		log.Info("stopping: finishing in-flight requests")
	case runErr = <-serveErr:
	}
	stopLoops()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.srv.Shutdown(sctx); err != nil {
				log.Warn("shutdown", "server", s.name, "err", err)
			}
		}()
	}
	wg.Wait()
	return runErr
}

// selfEnd is the bundle's heartbeat.self_end: "vast" when the head rents
// on vast (a node there destroys its own instance with CONTAINER_API_KEY).
func selfEnd(d *rentals.Driver) string {
	if d != nil && d.ProviderStatus().Kind == wire.ProviderVast {
		return wire.ProviderVast
	}
	return ""
}
