package main

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/server"
	"github.com/rayvast/rayvast/head/shim"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/teardown"
	"github.com/rayvast/rayvast/head/termtext"
	"github.com/rayvast/rayvast/internal/rayenv"
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
	ip, python                   string
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
	return up(ctx, u, cfg, newProgress(out), stderr)
}

// headNft runs head up's and head serve's nft scripts (nil: the nft binary); tests set it.
var headNft func(ctx context.Context, script string) error

// defaultStateDir is the state dir of a config: NAME.state beside NAME.json.
func defaultStateDir(cfgPath string) string {
	base := strings.TrimSuffix(filepath.Base(cfgPath), filepath.Ext(cfgPath))
	return filepath.Join(filepath.Dir(cfgPath), base+".state")
}

// up is head up after the flags: init, Ray head, serve. It returns the exit code.
func up(ctx context.Context, u upFlags, cfg *config.Config, p *progress, stderr io.Writer) int {
	f := u.serve
	f.provider = server.ProviderKind("", cfg)
	f.privateNetwork = server.PrivateNetwork(cfg)
	if f.state == "" {
		f.state = defaultStateDir(f.config)
	}
	fail := func(code int, format string, a ...any) int {
		p.end()
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
		u.python = rayHeadPython(u.python)
		if err := checkRayHeadPython(ctx, u.python, cfg.Ray.Version); err != nil {
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
	p      *progress
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
	r.p.end()
	if r.rayDone != nil {
		r.p.step("Ray head: stopped")
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
		r.p.step("stopped; rentals keep running until: head down --config %s", r.f.config)
	}
	return code
}

// hooks start the Ray head once the provider is open (a Docker network's
// gateway exists to bind) and the progress once the ports listen.
func (r *upRun) hooks(ctx, rayCtx context.Context) server.Hooks {
	return server.Hooks{
		Provider: func(context.Context) error {
			r.p.step("provider %s: ready", r.f.provider)
			if r.u.noRayHead {
				r.p.step("Ray head: run elsewhere, at %s (--no-ray-head)", r.cfg.Ray.HeadAddress)
				return nil
			}
			var as *autoscaling
			if r.cfg.Autoscaler != nil {
				// The monitor reads the config when the Ray head starts; the
				// admin socket it names listens a moment later.
				var err error
				if as, err = writeAutoscaling(r.st, r.cfg); err != nil {
					return err
				}
				r.autoscalerYAML = as.config
				r.p.step("Ray autoscaler: on (config %s); Ray decides how many nodes run", as.config)
				if ts := unplannedTypes(r.cfg); len(ts) > 0 {
					r.p.step("Ray autoscaler: node types %s have no cpus: Ray launches none of them for CPU tasks until one runs (set cpus)", strings.Join(ts, ", "))
				}
			}
			run, err := startRayHead(r.st, r.cfg, r.u.python, as, r.rayFailing, r.log)
			if err != nil {
				return err
			}
			r.rayRun.Store(run)
			r.rayDone = make(chan struct{})
			go func() { defer close(r.rayDone); run.Wait(rayCtx) }()
			r.p.step("Ray head: starting at %s (log %s)", r.cfg.Ray.HeadAddress, r.st.Path("ray-head.log"))
			go r.announceRayHead(rayCtx, run)
			if !r.firewallOn() {
				go sayPublicRayPorts(rayCtx, r.st.Dir, r.p, 5*time.Second, time.Minute)
			}
			return nil
		},
		RayPorts: r.rayPorts(),
		RayHead: func() (string, bool) {
			if run := r.rayRun.Load(); run != nil {
				return run.Current()
			}
			return "", false
		},
		Listening: func(srv *server.Server) {
			r.srv.Store(srv)
			r.p.step("listening: port A %s (enrollment), port B %s (heartbeats), admin %s", srv.PortA, srv.PortB, srv.AdminSocket)
			if r.firewallOn() {
				r.p.step("firewall: on (nftables table inet %s): ports A and B and the Ray head's ports take connections only from the candidates' and nodes' IPs and this machine",
					firewall.TableForStateDir(r.st.Dir))
			}
			if r.autoscalerYAML == "" {
				if path, err := writeAutoscalerYAML(r.st, r.cfg, srv.AdminSocket); err != nil {
					r.log.Warn("autoscaler yaml", "err", err)
				} else {
					r.p.step("Ray autoscaler config: %s", path)
				}
			}
			go r.p.watch(ctx, srv, r.st.Dir)
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
	r.p.step("Ray head: failed %d times in a row the same way, before it came up; Ray's last words (log %s):\n    %s",
		times, r.st.Path("ray-head.log"), strings.ReplaceAll(termtext.Lines(words), "\n", "\n    "))
}

// announceRayHead prints a step once the Ray head first runs (its GCS
// answers); later states show in the live summary.
func (r *upRun) announceRayHead(ctx context.Context, run *rayhead.Run) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, ok := run.Current(); ok {
			r.p.step("Ray head: running at %s (log %s)", r.cfg.Ray.HeadAddress, r.st.Path("ray-head.log"))
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
	r.p.step("--down-on-exit: ending every candidate and rental")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r.p.mu.Lock()
	r.p.clearLive()
	r.p.mu.Unlock()
	t := downTarget{st: r.st, cluster: r.st.Cluster, kind: r.f.provider, pc: r.cfg.Provider, head: head}
	if r.cfg.Cluster != "" {
		t.cluster = r.cfg.Cluster
	}
	if err := down(ctx, t, r.p.w, slog.New(slog.NewTextHandler(r.stderr, nil))); err != nil {
		fmt.Fprintf(r.stderr, "head down: %v\n", err)
		return 1
	}
	return 0
}

// ensureState runs head init when dir has no state yet, and loads it.
func ensureState(dir, ip, cluster string, p *progress) (*statedir.State, error) {
	if st, err := statedir.Load(dir); err == nil {
		p.step("state: %s (existing)", dir)
		return st, nil
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("state dir %s: exists but holds no complete state (not made by head init?)", dir)
	}
	if err := statedir.Init(statedir.Options{Dir: dir, IP: ip, Cluster: cluster}); err != nil {
		return nil, err
	}
	p.step("state: made %s (cluster CA, head certificate for %s, cluster token)", dir, ip)
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

// startRayHead writes (once) the Ray head's TLS and token files into
// STATE/ray-head and starts its supervisor.
// With as set, Ray's autoscaler runs on the Ray head with the plugin.
// The Ray head's ports are chosen free (rayhead.PickPorts), again for
// each restart, and its doors without a certificate kept on loopback by
// the shim (rayheadShim); failing reports a Ray head that fails the same
// way again.
func startRayHead(st *statedir.State, cfg *config.Config, python string, as *autoscaling, failing func(int, string), log *slog.Logger) (*rayhead.Run, error) {
	address := cfg.Ray.HeadAddress
	host, portText, _ := net.SplitHostPort(address)
	gcs, _ := strconv.Atoi(portText)
	headIP, err := netip.ParseAddr(host)
	if err != nil || !headIP.Unmap().Is4() {
		// The shim's loopback rule is IPv4 (head/shim): without it Ray 2.52's
		// job agent would take anyone's job on the head's IP.
		return nil, fmt.Errorf("ray.head_address %s: the Ray head needs an IPv4 head IP (its job agent and metrics are kept on loopback by an IPv4 rule); run it elsewhere with --no-ray-head", address)
	}
	tmp := rayhead.TempDir(st.Dir)
	if err := rayhead.CheckTempDir(tmp); err != nil {
		return nil, err
	}
	if !rayhead.PortFree(gcs) {
		return nil, fmt.Errorf("ray.head_address %s: port %d is in use on this machine (another cluster's Ray head? every cluster on one machine needs a GCS port of its own)", address, gcs)
	}
	files, err := rayHeadFilesOnce(st, time.Now())
	if err != nil {
		return nil, err
	}
	shimDir, err := rayheadShim(st)
	if err != nil {
		return nil, err
	}
	// Each run's ports are chosen free when it starts (rayhead.Relaunch).
	launch := func() (rayhead.Launch, error) {
		ports, err := rayhead.PickPorts(gcs, nil)
		if err != nil {
			return rayhead.Launch{}, err
		}
		argv := rayhead.WithPorts(rayhead.Command(python, address, tmp), ports)
		argv = rayhead.WithResources(argv, cfg.Ray.HeadResources)
		env := rayhead.Env(os.Environ(), files.rayhead(), python)
		env = rayhead.PortsEnv(env, ports, headIP.Unmap().String(), shimDir)
		if as != nil {
			argv = rayhead.WithAutoscaler(argv, as.config)
			env = rayhead.AutoscalerEnv(env, as.pluginDir)
		}
		return rayhead.Launch{Command: argv, Env: env, Ports: &ports,
			Dashboard: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.Dashboard))}, nil
	}
	first, err := launch()
	if err != nil {
		return nil, err
	}
	sup, err := rayhead.New(rayhead.Config{Command: first.Command, Env: first.Env,
		Address: address, Dashboard: first.Dashboard, TempDir: tmp,
		Ports: first.Ports, Relaunch: launch, OnFailing: failing,
		LogPath: st.Path("ray-head.log"), StatePath: st.Path(rayhead.StateFile),
		Log: log.With("part", "ray-head")})
	if err != nil {
		return nil, err
	}
	return sup.Start()
}

// rayheadShim writes the built-in shim into STATE/ray-head/shim for the
// Ray head's PYTHONPATH and returns that dir. On the head's machine the
// node IP is local, so the shim rewrites nothing but its loopback ports.
func rayheadShim(st *statedir.State) (string, error) {
	dir := filepath.Join(st.Path("ray-head"), "shim")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("ray head shim: %w", err)
	}
	content, _ := shim.Default()
	path := filepath.Join(dir, shim.Name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		return "", fmt.Errorf("ray head shim: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("ray head shim: %w", err)
	}
	return dir, nil
}

// rayHeadPython is the Ray head's Python: --python, $PYTHON, or python3,
// made an absolute path (a venv's bin/python stays itself, not what it
// links to): the status names it for `head run`, and its dir goes first on
// the Ray head's PATH.
func rayHeadPython(flag string) string {
	python := flag
	if python == "" {
		python = os.Getenv("PYTHON")
	}
	if python == "" {
		python = "python3"
	}
	if p, err := exec.LookPath(python); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			python = abs
		}
	}
	return python
}

// checkRayHeadPython fails early when the Ray head's Python has no Ray, or
// another Ray than the config names (every node must run the head's Ray,
// and the enrollment refuses nodes of another version).
func checkRayHeadPython(ctx context.Context, python, want string) error {
	got, err := rayenv.Version(ctx, python)
	if err != nil {
		return fmt.Errorf("the Ray head's Python cannot import ray (%v): make a venv with it (head ray-env --version %s) and pass --python", err, cmp.Or(want, rayenv.Newest))
	}
	if want != "" && got != want {
		return fmt.Errorf("the Ray head's Python %s has Ray %s, the config's ray.version is %s (head ray-env --version %s makes one)", python, got, want, want)
	}
	return nil
}

// rayHeadFilesOnce is head ray-head-cert into STATE/ray-head, reusing the
// files of an earlier run unless the certificate ends within renewBefore.
func rayHeadFilesOnce(st *statedir.State, now time.Time) (rayHeadFiles, error) {
	dir := st.Path("ray-head")
	f := rayHeadFiles{ca: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "ray-head.crt"),
		key: filepath.Join(dir, "ray-head.key"), token: filepath.Join(dir, "cluster_token")}
	have := 0
	for _, p := range []string{f.ca, f.cert, f.key, f.token} {
		if _, err := os.Stat(p); err == nil {
			have++
		}
	}
	if have == 4 {
		if !certEndsBefore(f.cert, now.Add(renewBefore)) {
			return f, nil
		}
		for _, p := range []string{f.ca, f.cert, f.key, f.token} {
			if err := os.Remove(p); err != nil {
				return f, fmt.Errorf("renew ray head files: %w", err)
			}
		}
		have = 0
	}
	if have > 0 {
		return f, fmt.Errorf("ray head files: %s is incomplete; remove it to have it made again", dir)
	}
	ip, err := netip.ParseAddr(st.HeadIP)
	if err != nil {
		return f, fmt.Errorf("state head IP %q: %w", st.HeadIP, err)
	}
	return writeRayHeadFiles(st, ip, dir, now)
}

// renewBefore is how long before its end the Ray head's certificate is
// issued again at a head up (it lasts pki.NodeLifetime).
const renewBefore = 30 * 24 * time.Hour

// certEndsBefore reports whether the PEM certificate at path ends before t
// (an unreadable one does: it is made again).
func certEndsBefore(path string, t time.Time) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return true
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return true
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	return err != nil || c.NotAfter.Before(t)
}
