package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/rayhead/autoscaler"
	"github.com/rayvast/rayvast/head/server"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/teardown"
	"github.com/rayvast/rayvast/head/termtext"
	"github.com/rayvast/rayvast/head/upprogress"
)

const upUsage = `usage: head up --config FILE [--state DIR] [--no-ray-head] [--down-on-exit] [flags]

The whole cluster from one file (JSON; examples/ and docs/running.md's "Run it
for real" show its fields): makes the state dir when it is new
(head init), starts the Ray head with the cluster's TLS files and token and
keeps it running (unless --no-ray-head), then serves ports A and B with the
provider the config's "provider" block names. Ctrl-C or SIGTERM stops serving
and the Ray head; rentals stay until "head down --config FILE" unless
--down-on-exit. The head's IP is the host of ray.head_address unless --ip.

`

type upFlags struct {
	serve                        serveFlags
	ip, python, gcsStore         string
	noRayHead, downOnExit, quiet bool
}

func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("head up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var u upFlags
	f := &u.serve
	fs.StringVar(&f.config, "config", "", "config file (JSON, as in examples/) with its provider block")
	fs.StringVar(&f.state, "state", "", "state dir (default: beside the config, NAME.state for NAME.json)")
	fs.BoolVar(&u.noRayHead, "no-ray-head", false, "do not start a Ray head: one runs elsewhere at ray.head_address")
	fs.BoolVar(&u.downOnExit, "down-on-exit", false, "on Ctrl-C/SIGTERM also end every rental (head down)")
	fs.StringVar(&u.ip, "ip", "", "the head's IP as rentals reach it, for a new state dir (default: ray.head_address's host)")
	fs.StringVar(&u.python, "python", "", "python of the Ray head, with the cluster's Ray (default: $PYTHON, else python3; head ray-env makes a venv with real Ray and prints its python)")
	fs.StringVar(&f.agent, "agent", "", "agent binary served at /bootstrap (default: the one built into head)")
	fs.StringVar(&f.shim, "shim", "", "Python file put first on Ray's PYTHONPATH (default: the built-in sitecustomize.py; none: no shim)")
	fs.StringVar(&f.bootloader, "bootloader", "", "bootloader.sh of built-in rentals (default: the one built into head)")
	fs.StringVar(&f.listenA, "listen-a", "", "port A address (default: HEAD_IP:8443)")
	fs.StringVar(&f.listenB, "listen-b", "", "port B address (default: HEAD_IP:8444)")
	fs.StringVar(&f.logLevel, "log-level", "info", "level of the head's log (STATE/head.log; warnings also on stderr)")
	fs.StringVar(&f.firewall, "firewall", "auto", "nftables guard of ports A and B and of every port the Ray head listens on: on, off, or auto (on with the vast provider, and with none unless the config's provider.private_network)")
	fs.StringVar(&u.gcsStore, "gcs-store", "on", "the Ray head's GCS store in the state dir (RocksDB on Ray 2.60+, a Redis head up runs before): on, so a GCS that dies comes back with the cluster's actors, tasks and placement groups; or off (Ray's default: in memory only, a GCS that dies ends them all)")
	fs.BoolVar(&u.quiet, "quiet", false, "no progress lines")
	fs.Usage = func() { fmt.Fprint(fs.Output(), upUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if f.config == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if u.gcsStore != "on" && u.gcsStore != "off" {
		fmt.Fprintf(stderr, "head up: --gcs-store %q: want on or off\n", u.gcsStore)
		return 2
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		fmt.Fprintf(stderr, "head up: %v\n", err)
		return 2
	}
	f.provider = server.ProviderKind("", cfg)
	f.privateNetwork = server.PrivateNetwork(cfg)
	f.nft = headNft
	if err := f.server(nil, cfg, nil, server.Hooks{}).CheckFirewall(ctx); err != nil {
		fmt.Fprintf(stderr, "head up: %v\n", err)
		return 2
	}
	out := stdout
	if u.quiet {
		out = io.Discard
	}
	return up(ctx, u, cfg, upprogress.New(out), stderr)
}

// headNft runs head up's and head serve's nft scripts (nil: the nft binary); tests set it.
var headNft func(ctx context.Context, script string) error

// defaultStateDir is the state dir of a config: NAME.state beside NAME.json.
func defaultStateDir(cfgPath string) string {
	base := strings.TrimSuffix(filepath.Base(cfgPath), filepath.Ext(cfgPath))
	return filepath.Join(filepath.Dir(cfgPath), base+".state")
}

// up is head up after the flags: init, Ray head, serve. It returns the exit code.
func up(ctx context.Context, u upFlags, cfg *config.Config, p *upprogress.Printer, stderr io.Writer) int {
	f := u.serve // provider kind, private network and nft set by runUp
	if f.state == "" {
		f.state = defaultStateDir(f.config)
	}
	fail := func(code int, format string, a ...any) int {
		p.End()
		fmt.Fprintf(stderr, "head up: "+format+"\n", a...)
		return code
	}
	rayHost, _, _ := net.SplitHostPort(cfg.Ray.HeadAddress) // validated by config
	if u.ip == "" {
		u.ip = rayHost
	}
	if _, err := netip.ParseAddr(u.ip); err != nil {
		return fail(2, "head IP %q: not an IP literal (ray.head_address's host, or --ip)", u.ip)
	}
	st, err := ensureState(f.state, u.ip, cfg.Cluster, p)
	if err != nil {
		return fail(1, "%v", err)
	}
	if !u.noRayHead && st.HeadIP != rayHost {
		// The Ray head runs beside the head: nodes reach both at one IP.
		return fail(2, "ray.head_address %s: its host is not the state dir's head IP %s (use --no-ray-head for a Ray head elsewhere)", cfg.Ray.HeadAddress, st.HeadIP)
	}
	if !u.noRayHead {
		u.python = rayhead.Python(u.python)
		if err := rayhead.CheckPython(ctx, u.python, cfg.Ray.Version); err != nil {
			return fail(2, "%v", err)
		}
	}
	if f.listenA == "" {
		f.listenA = net.JoinHostPort(st.HeadIP, "8443")
	}
	if f.listenB == "" {
		f.listenB = net.JoinHostPort(st.HeadIP, "8444")
	}
	log, closeLog, err := upLog(st.Path("head.log"), f.logLevel, stderr)
	if err != nil {
		return fail(2, "%v", err)
	}
	defer closeLog()

	r := &upRun{u: u, f: f, cfg: cfg, st: st, p: p, log: log, stderr: stderr}
	return r.run(ctx)
}

// upRun is one head up from the state dir on: the Ray head and serve.
type upRun struct {
	u      upFlags
	f      serveFlags
	cfg    *config.Config
	st     *statedir.State
	p      *upprogress.Printer
	log    *slog.Logger
	stderr io.Writer

	rayDone chan struct{} // closed when the Ray head's supervisor returns; nil: none started
	rayRun  atomic.Pointer[rayhead.Run]
	// autoscalerYAML is STATE/autoscaler.yaml once written for the Ray
	// head's autoscaler ("" when the autoscaler is off).
	autoscalerYAML string
	// srv is the running head once its ports listen (past the state dir's
	// lock); nil before.
	srv atomic.Pointer[server.Server]
}

func (r *upRun) run(ctx context.Context) int {
	rayCtx, stopRay := context.WithCancel(context.Background())
	defer stopRay()
	// Serving ends when ctx does, but --down-on-exit first ends the
	// candidates through the running head (its admin API), then stops it.
	serveCtx, stopServe := context.WithCancel(context.Background())
	defer stopServe()
	downCode := make(chan int, 1) // holds a code when the down ran
	watcher := make(chan struct{})
	go func() {
		defer close(watcher)
		select {
		case <-ctx.Done():
			if srv := r.srv.Load(); r.u.downOnExit && srv != nil {
				// Through the head's own admin API, in-process: the
				// candidates end with the reason "down".
				downCode <- r.downOnExit(srv.Cluster())
			}
			stopServe()
		case <-serveCtx.Done():
		}
	}()
	serveErr := server.Run(serveCtx, r.f.server(r.st, r.cfg, r.log, r.hooks(ctx, rayCtx)))
	stopServe()
	<-watcher
	stopRay()
	if r.rayDone != nil {
		<-r.rayDone
	}
	r.p.End()
	if r.rayDone != nil {
		r.p.Step("Ray head: stopped")
	}
	code := 0
	if serveErr != nil {
		fmt.Fprintf(r.stderr, "head up: %v (log %s)\n", serveErr, r.st.Path("head.log"))
		code = 1
	}
	if r.u.downOnExit {
		var c int
		select {
		case c = <-downCode:
		default:
			// Serving ended by itself. Only a head that served ends the
			// rentals: one refused (another head holds the state dir) must
			// not end the running head's cluster.
			if r.srv.Load() != nil {
				c = r.downOnExit(nil) // no head runs: the provider ends the rentals
			}
		}
		if c != 0 && code == 0 {
			code = c
		}
	} else if serveErr == nil {
		r.p.Step("stopped; rentals keep running until: head down --config %s", r.f.config)
	}
	return code
}

// hooks start the Ray head once the provider is open (a Docker network's
// gateway exists to bind) and the progress once the ports listen.
func (r *upRun) hooks(ctx, rayCtx context.Context) server.Hooks {
	return server.Hooks{
		Provider: func(context.Context) error {
			r.p.Step("provider %s: ready", r.f.provider)
			if r.u.noRayHead {
				r.p.Step("Ray head: run elsewhere, at %s (--no-ray-head)", r.cfg.Ray.HeadAddress)
				return nil
			}
			var as autoscaler.Files
			if r.cfg.Autoscaler != nil {
				// The monitor reads the config when the Ray head starts; the
				// admin socket it names listens a moment later.
				var err error
				if as, err = autoscaler.Write(r.st, r.cfg); err != nil {
					return err
				}
				r.autoscalerYAML = as.Config
				r.p.Step("Ray autoscaler: on (config %s); Ray decides how many nodes run", as.Config)
				if ts := autoscaler.UnplannedTypes(r.cfg); len(ts) > 0 {
					r.p.Step("Ray autoscaler: node types %s have no cpus: Ray launches none of them for CPU tasks until one runs (set cpus)", strings.Join(ts, ", "))
				}
			}
			run, err := rayhead.StartCluster(rayhead.ClusterConfig{State: r.st, Config: r.cfg, Python: r.u.python,
				Autoscaler: as.Config, PluginDir: as.PluginDir, OnFailing: r.rayFailing, RayVersion: r.cfg.Ray.Version,
				NoStore: r.u.gcsStore == "off", Log: r.log})
			if err != nil {
				return err
			}
			r.rayRun.Store(run)
			r.rayDone = make(chan struct{})
			go func() { defer close(r.rayDone); run.Wait(rayCtx) }()
			r.p.Step("Ray head: starting at %s (log %s)", r.cfg.Ray.HeadAddress, r.st.Path("ray-head.log"))
			if r.u.gcsStore == "off" {
				r.p.Step("Ray head: GCS store off (--gcs-store off): a GCS that dies ends every actor, task and placement group, and the nodes restart their Ray")
			} else {
				r.p.Step("Ray head: the GCS keeps the cluster in %s: a GCS that dies comes back with it", run.Status().Store)
			}
			go r.announceRayHead(rayCtx, run)
			if !r.firewallOn() {
				go r.p.PublicRayPorts(rayCtx, r.st.Dir, 5*time.Second, time.Minute)
			}
			return nil
		},
		RayPorts: r.rayPorts(),
		RayHead: func() (string, bool) {
			// With the GCS's store the Ray head keeps its ID across its
			// restarts: the nodes keep their Ray, which waits for the GCS.
			if run := r.rayRun.Load(); run != nil {
				return run.Named()
			}
			return "", false
		},
		Listening: func(srv *server.Server) {
			r.srv.Store(srv)
			r.p.Step("listening: port A %s (enrollment), port B %s (heartbeats), admin %s", srv.PortA, srv.PortB, srv.AdminSocket)
			if r.firewallOn() {
				r.p.Step("firewall: on (nftables table inet %s): ports A and B and the Ray head's ports take connections only from the candidates' and nodes' IPs and this machine",
					firewall.TableFor(r.st.AppID))
			}
			if r.autoscalerYAML == "" {
				if path, err := autoscaler.WriteConfig(r.st, r.cfg, srv.AdminSocket); err != nil {
					r.log.Warn("autoscaler yaml", "err", err)
				} else {
					r.p.Step("Ray autoscaler config: %s", path)
				}
			}
			go r.p.Watch(ctx, srv, r.st.Dir)
		},
	}
}

// rayPorts is the firewall's source of the Ray head's ports (nil with
// --no-ray-head: no Ray head here).
func (r *upRun) rayPorts() func() ([]int, error) {
	if r.u.noRayHead {
		return nil
	}
	return rayhead.FirewallPorts(r.st.Dir)
}

// rayFailing tells the user that the Ray head fails the same way again,
// with Ray's own last words (also in head status).
func (r *upRun) rayFailing(times int, words string) {
	r.p.Step("Ray head: failed %d times in a row the same way, before it came up; Ray's last words (log %s):\n    %s",
		times, r.st.Path("ray-head.log"), strings.ReplaceAll(termtext.Lines(words), "\n", "\n    "))
}

// announceRayHead prints a step once the Ray head first runs (its GCS
// answers); later states show in the live summary.
func (r *upRun) announceRayHead(ctx context.Context, run *rayhead.Run) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, ok := run.Current(); ok {
			r.p.Step("Ray head: running at %s (log %s)", r.cfg.Ray.HeadAddress, r.st.Path("ray-head.log"))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// firewallOn is whether the head guards its ports (server.Config.FirewallOn).
func (r *upRun) firewallOn() bool { return r.f.server(r.st, r.cfg, nil, server.Hooks{}).FirewallOn() }

// downOnExit is head down for --down-on-exit, through head, the running
// head in-process (nil: none runs any more, the provider ends the rentals).
func (r *upRun) downOnExit(head teardown.Cluster) int {
	r.p.Step("--down-on-exit: ending every candidate and rental")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := r.p.Plain()
	t := downTarget{st: r.st, cluster: r.st.Cluster, kind: r.f.provider, pc: r.cfg.Provider, head: head}
	if r.cfg.Cluster != "" {
		t.cluster = r.cfg.Cluster
	}
	if err := down(ctx, t, w, slog.New(slog.NewTextHandler(r.stderr, nil))); err != nil {
		fmt.Fprintf(r.stderr, "head down: %v\n", err)
		return 1
	}
	return 0
}

// ensureState runs head init when dir has no state yet, and loads it.
func ensureState(dir, ip, cluster string, p *upprogress.Printer) (*statedir.State, error) {
	if st, err := statedir.Load(dir); err == nil {
		p.Step("state: %s (existing)", dir)
		return st, nil
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("state dir %s: exists but holds no complete state (not made by head init?)", dir)
	}
	if err := statedir.Init(statedir.Options{Dir: dir, IP: ip, Cluster: cluster}); err != nil {
		return nil, err
	}
	p.Step("state: made %s (cluster CA, head certificate for %s, cluster token)", dir, ip)
	return statedir.Load(dir)
}

// upLog writes the head's full log to path and its warnings to stderr too.
func upLog(path, levelName string, stderr io.Writer) (*slog.Logger, func(), error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, nil, fmt.Errorf("--log-level: %w", err)
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("head log: %w", err)
	}
	h := slog.NewMultiHandler(slog.NewTextHandler(fh, &slog.HandlerOptions{Level: level}),
		slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return slog.New(h), func() { fh.Close() }, nil
}
