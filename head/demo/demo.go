// Package demo is `head demo`: the whole rayvast flow on one machine with
// Docker, for a new user. It runs `head up` (its own binary) on a built-in
// config with the Docker provider, so the demo and the real thing are one
// code path: state dir, Ray head (real Ray from a venv of this machine, or
// the stand-in ray of --fakeray), ports.
// Then it asks for three candidates
// of which one deliberately keeps NET_RAW, shows each one's progress live,
// prints a summary, leaves the cluster running until Ctrl-C, then removes
// everything it created (containers, network, state dir, the head process).
// The candidate image stays cached for the next run.
package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rayenv"
	"github.com/rayvast/rayvast/internal/wire"
)

// Node types of the demo config. The unsafe one is rented with NET_RAW kept
// (RAYVAST_DOCKER_UNSAFE_NODE_TYPES), so the head must refuse it.
const (
	safeType   = "cpu"
	unsafeType = "cpu-unsafe"
)

type options struct {
	state, cluster, image, base, fakeray, agent, bootloader, head string
	ray, rayWheels                                                string
	timeout                                                       time.Duration
	interval                                                      int
	noWait                                                        bool
	serveArgs                                                     []string
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// Run is `head demo [flags]`; it returns the exit code: 0 when the two safe
// candidates became nodes and the unsafe one was refused.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	var serveArgs listFlag
	fs := flag.NewFlagSet("head demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.state, "state", "", "state dir for the demo's head (default: a temp dir, removed at the end)")
	fs.StringVar(&o.cluster, "cluster", "demo", "cluster name (labels the containers and network)")
	fs.StringVar(&o.image, "image", "", "candidate image (default: build or reuse the cached rayvast-candidate image)")
	fs.StringVar(&o.base, "base", "", "base of the built image: debootstrap (Debian, needs debootstrap and a mirror), host (this machine's python3 and tools); default: debootstrap, else host")
	fs.StringVar(&o.ray, "ray", "", "Ray in the cluster: a version of real Ray (default "+rayenv.Newest+", or the stand-in when real Ray cannot be had here), or \"stand-in\" for test/fakeray")
	fs.StringVar(&o.rayWheels, "ray-wheels", "", "folder of Ray's wheels to install from (default: ../shared/wheels beside the repo when it exists, else the package index)")
	fs.StringVar(&o.fakeray, "fakeray", "", "stand-in ray package for --ray stand-in (default: test/fakeray of the repo)")
	fs.StringVar(&o.agent, "agent", "", "agent binary the head serves (default: agent next to this binary, then bin/agent, then the one built into head)")
	fs.StringVar(&o.bootloader, "bootloader", "", "bootloader.sh, the containers' command (default: next to this binary's dir, then ./bootloader.sh)")
	fs.StringVar(&o.head, "head", "", "head binary to run head up with (default: this binary)")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up waiting for the candidates after this long")
	fs.IntVar(&o.interval, "heartbeat-interval", 10, "heartbeat interval in seconds")
	fs.BoolVar(&o.noWait, "no-wait", false, "clean up right after the summary instead of waiting for Ctrl-C")
	fs.Var(&serveArgs, "serve-arg", "extra argument for the head up command the demo runs (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: head demo [flags]\n\nRuns a rayvast cluster on the local Docker Engine (as root), with real Ray by\ndefault: three candidates, one of them unsafe on purpose, live progress, a\nsummary, then a Ray job from this machine (a task on each node, an object\nmoved between them). The cluster stays up until Ctrl-C, which removes it all.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	o.serveArgs = serveArgs
	// SIGHUP too: a closed terminal must not kill the demo halfway through
	// its cleanup. A broken stdout pipe (SIGPIPE) must not either.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	d := &demo{o: o, out: stdout, errOut: stderr, eng: dockerengine.New(""), now: time.Now}
	code := d.run(ctx)
	d.keepWork = code != 0
	d.cleanup()
	return code
}

type demo struct {
	o      options
	out    io.Writer
	errOut io.Writer
	eng    *dockerengine.Client
	now    func() time.Time

	exe        string
	python     string // the Ray head's Python, real Ray ("" = the stand-in)
	rayVersion string
	workDir    string // temp: head log, config, and the state dir unless --state
	stateDir   string
	keepWork   bool // a failed run keeps the head log
	netMade    bool
	serve      *exec.Cmd
	serveDone  chan struct{}
	logFile    *os.File
}

// say and fail print a constant format with inert arguments: every value
// they show (Docker's answers, the admin API's, errors quoting either) may
// hold terminal escapes or newlines.
func (d *demo) say(format string, a ...any) { fmt.Fprintf(d.out, format+"\n", inertArgs(a)...) }

func (d *demo) fail(format string, a ...any) int {
	fmt.Fprintf(d.errOut, "head demo: "+format+"\n", inertArgs(a)...)
	return 1
}

func (d *demo) run(ctx context.Context) int {
	if os.Geteuid() != 0 {
		return d.fail("run me as root (Docker, and a network of my own)")
	}
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	v, err := d.eng.Version(vctx)
	cancel()
	if err != nil {
		return d.fail("no Docker Engine at %s: %v", dockerengine.DefaultSocket, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return d.fail("find my own binary: %v", err)
	}
	if d.o.head != "" {
		exe = d.o.head
	}
	d.exe = exe
	// The agent is built into head; a file overrides it (--agent, or one
	// beside this binary as ./build.sh leaves it).
	agent, _ := d.findFile(d.o.agent, "agent", filepath.Join(filepath.Dir(exe), "agent"), "bin/agent")
	if d.o.agent != "" && agent == "" {
		return d.fail("--agent %s: not a file", d.o.agent)
	}
	boot, err := d.findFile(d.o.bootloader, "bootloader.sh", filepath.Join(filepath.Dir(exe), "..", "bootloader.sh"), "bootloader.sh")
	if err != nil {
		return d.fail("%v", err)
	}
	unlock, err := lockCluster(filepath.Join(os.TempDir(), "rayvast-locks"), d.o.cluster)
	if err != nil {
		return d.fail("%v", err)
	}
	defer unlock()
	d.say("rayvast demo: Docker %s, cluster %q", v.Version, d.o.cluster)
	// A demo interrupted hard (SIGKILL) leaves its cluster behind; the lock
	// says no other demo of this name is alive to own it.
	_ = vastnet.Cleanup(ctx, d.eng, d.mine)

	if d.o.base != "" && d.o.base != candidateimage.BaseDebootstrap && d.o.base != candidateimage.BaseHost {
		return d.fail("--base %q: want debootstrap or host", d.o.base)
	}
	img, err := d.prepareRay(ctx)
	if err != nil {
		return d.fail("%v", err)
	}
	netw, created, err := vastnet.EnsureNetwork(ctx, d.eng, d.o.cluster)
	if err != nil {
		return d.fail("%v", err)
	}
	d.netMade = created
	gw := netw.Gateway.String()
	d.say("· network %s %s: the head listens on its gateway %s", netw.Name, netw.Subnet, gw)

	if err := d.makeWorkDir(); err != nil {
		return d.fail("%v", err)
	}
	admin, err := d.startUp(ctx, gw, agent, boot, img)
	if err != nil {
		return d.fail("%v", err)
	}

	unsafe := map[string]bool{}
	for _, t := range []string{safeType, safeType, unsafeType} {
		// The join token in the answer is not kept: with the docker
		// provider the head rents the container itself.
		cr, err := admin.Create(ctx, wire.CandidateRequest{NodeType: t})
		if err != nil {
			return d.fail("%v (head log: %s)", err, d.logFile.Name())
		}
		unsafe[cr.CandidateID] = t == unsafeType
	}
	d.say("· 3 candidates asked for; %s* keeps NET_RAW on purpose and must be refused\n", unsafeType)
	rows, err := d.watch(ctx, admin, unsafe)
	if err != nil {
		return d.fail("%v (head log: %s)", err, d.logFile.Name())
	}
	ok := d.summary(ctx, admin, rows)
	if ok && d.python == "" {
		d.say("\nAs designed (with the stand-in Ray: no Ray job to run).")
	}
	if ok && d.python != "" {
		ok = d.runJob(ctx, 2)
		if ok {
			d.say("\nAs designed: a real Ray %s cluster of 2 nodes behind vast's NAT ran the job.", d.rayVersion)
		} else {
			d.say("\nNot as designed: the nodes enrolled but the Ray job failed (Ray head log %s, head log %s)",
				filepath.Join(d.stateDir, "ray-head.log"), d.logFile.Name())
		}
	}
	if d.o.noWait || ctx.Err() != nil {
		return exitCode(ok)
	}
	d.say("\nThe cluster keeps running: admin socket %s, head log %s.", filepath.Join(d.stateDir, statedir.AdminSocket), d.logFile.Name())
	d.say("Try, in another terminal:\n  %s status --state %s\n  docker ps --filter label=%s=%s\n  curl -s --unix-socket %s http://head%s",
		d.exe, d.stateDir, vastnet.LabelCluster, d.o.cluster, filepath.Join(d.stateDir, statedir.AdminSocket), adminclient.NodesPath)
	if d.python != "" {
		d.say("  %s run --state %s -- python your_job.py        (a Ray driver with the cluster's TLS and token)", d.exe, d.stateDir)
		d.say("  %s run --state %s -- ray job submit -- python3 -c 'import ray; ray.init(); print(ray.cluster_resources())'", d.exe, d.stateDir)
	}
	d.say("Press Ctrl-C to remove everything the demo created.")
	select {
	case <-ctx.Done():
	case <-d.serveDone:
		d.say("the head exited; see %s", d.logFile.Name())
		return 1
	}
	d.say("\nCtrl-C: cleaning up")
	return exitCode(ok)
}

// lockCluster takes a per-cluster lock for the life of the demo, so a
// second demo of the same name refuses instead of removing the first one's
// containers. The kernel drops it when the process dies.
func lockCluster(dir, cluster string) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock dir: %w", err)
	}
	path := filepath.Join(dir, "demo-"+vastnet.NetworkName(cluster)+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another head demo runs cluster %q (lock %s): stop it or pass --cluster NAME", cluster, path)
	}
	return func() { f.Close() }, nil
}

func exitCode(ok bool) int {
	if ok {
		return 0
	}
	return 1
}

func (d *demo) mine(cluster string) bool { return cluster == d.o.cluster }

// findFile returns flag's file, or the first default that exists.
func (d *demo) findFile(flagValue, what string, defaults ...string) (string, error) {
	cands := defaults
	if flagValue != "" {
		cands = []string{flagValue}
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return filepath.Abs(c)
		}
	}
	return "", fmt.Errorf("no %s (tried %s): run me from the repo root after ./build.sh", what, strings.Join(cands, ", "))
}

func freePort(ip string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", fmt.Errorf("pick a port on %s: %w", ip, err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p, nil
}

// cleanup stops the head, removes the cluster's containers and network and
// a temp state dir. It runs on every exit path, Ctrl-C included.
func (d *demo) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if d.serve != nil && d.serve.Process != nil {
		_ = d.serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.serveDone:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-d.serve.Process.Pid, syscall.SIGKILL)
			<-d.serveDone
		}
	}
	if d.exe != "" { // the cluster was ours to make
		if err := vastnet.Cleanup(ctx, d.eng, d.mine); err != nil {
			fmt.Fprintf(d.errOut, "head demo: cleanup: %v\n", err)
		}
	}
	if d.logFile != nil {
		d.logFile.Close()
	}
	if d.exe == "" {
		return
	}
	what := "the head process, containers and network of cluster " + strconv.Quote(d.o.cluster)
	switch {
	case d.workDir == "":
	case d.keepWork:
		_ = os.RemoveAll(filepath.Join(d.workDir, "state"))
		fmt.Fprintf(d.errOut, "head demo: kept the head log for you: %s\n", d.logFile.Name())
	default:
		_ = os.RemoveAll(d.workDir)
		what += ", the temp dir"
	}
	d.say("removed: %s (the image stays cached for the next run)", what)
}
