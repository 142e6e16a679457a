package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/agent/bundle"
	"github.com/rayvast/rayvast/agent/enroll"
	"github.com/rayvast/rayvast/agent/envconfig"
	"github.com/rayvast/rayvast/agent/guestapi"
	"github.com/rayvast/rayvast/agent/hostcheck"
	"github.com/rayvast/rayvast/agent/raylaunch"
	"github.com/rayvast/rayvast/internal/portcheck"
	"github.com/rayvast/rayvast/internal/wire"
)

const runUsage = `usage: agent [run]

Enrolls this container with the rayvast head, then starts Ray and stays as
its supervisor (PID 1). bootloader.sh starts it; it takes no flags, only this
environment:

  RAYVAST_HEAD, RAYVAST_PORT_A, RAYVAST_PORT_B, RAYVAST_BOOTSTRAP_SHA256,
  RAYVAST_CA_SHA256, RAYVAST_JOIN_TOKEN (required)
  RAYVAST_INSTANCE_ID (else CONTAINER_ID), RAYVAST_PUBLIC_IP (else PUBLIC_IPADDR),
  RAYVAST_PORTS (64 comma-separated, else VAST_TCP_PORT_70000…70063)
  RAYVAST_EGRESS_RESOLVERS (kind@ip:port,…; default public resolvers)
  RAYVAST_PUBLIC_LOGS, RAYVAST_PUBLIC_SYSINFO, RAYVAST_PUBLIC_TCBINFO (0/1)
  RAYVAST_PYTHON (default python3), RAYVAST_STATE (default /run/rayvast)
  RAYVAST_RAY_MAX_RESTARTS (default 5), RAYVAST_RAY_RESTART_WINDOW (default 10m),
  RAYVAST_RAY_RESTART_DELAY (default 1s): Ray exiting on its own is restarted
  after the delay (doubling, at most 30s); one more exit after the maximum
  within the window is a crash loop, reported to the head, and the agent exits

Exit codes: Ray's own (128+signal when signalled); 1 when enrollment is
refused or fails; 2 when the environment is invalid.
`

// execTime approximates the moment the binary was exec'd: package vars
// initialise before main, after only the Go runtime's own start.
var execTime = time.Now()

func runCommand(args []string, secrets envconfig.Secrets, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if isHelp(args[0]) {
			fmt.Fprint(stdout, runUsage)
			return 0
		}
		fmt.Fprintf(stderr, "agent run: takes no arguments\n\n%s", runUsage)
		return 2
	}
	cfg, err := envconfig.Parse(secrets.Lookup(os.LookupEnv))
	if err != nil {
		fmt.Fprintf(stderr, "agent: invalid environment:\n%v\n", err)
		return 2
	}
	a := newAgent(cfg, stderr)
	return a.run()
}

// agent holds what one enrolling agent knows as it goes.
type agent struct {
	cfg      envconfig.Config
	log      *slog.Logger
	stderr   io.Writer
	agentLog *guestapi.LogRing // /logs/agent
	rayLog   *guestapi.LogRing // /logs/ray
	selfSum  string
	checks   wire.CheckReport
	versions <-chan hostcheck.RayVersions // the version probe, started first
	// Ray's placement, decided once (rayPlacement).
	placeOnce  sync.Once
	rayTempDir string
	rayCPUs    int
	placeErr   error
	portKey    []byte
	ca         *x509.Certificate
	headA      netip.AddrPort
	meshAddr   string             // the mesh's loopback address for the shim ("" none)
	rayIface   string             // the interface holding the container's address ("" unknown)
	meshKick   chan chan struct{} // the mesh's asks for a heartbeat now
}

func newAgent(cfg envconfig.Config, stderr io.Writer) *agent {
	ring := guestapi.NewLogRing(guestapi.MaxLogTail)
	return &agent{
		cfg:      cfg,
		log:      slog.New(slog.NewTextHandler(io.MultiWriter(stderr, ring), nil)),
		stderr:   stderr,
		agentLog: ring,
		rayLog:   guestapi.NewLogRing(guestapi.MaxLogTail),
		headA:    netip.AddrPortFrom(cfg.Head, uint16(cfg.PortA)),
	}
}

func (a *agent) run() int {
	a.log.Info("agent starting", "version", version, "instance_id", a.cfg.InstanceID, "head", a.headA.String(), "public_ip", a.cfg.PublicIP.String())
	probeCtx, stopProbe := context.WithCancel(context.Background())
	defer stopProbe()
	a.versions = a.probeRay(probeCtx) // first: Python's start is the slowest step before enrolling
	a.selfSum, _ = selfSHA256()
	if a.selfSum != a.cfg.BootstrapSHA256 {
		// bootloader.sh checked the download; an image may embed another build.
		a.log.Warn("this agent binary is not the one RAYVAST_BOOTSTRAP_SHA256 names", "sha256", a.selfSum)
	}

	// Until Ray runs, a stop signal cancels enrollment. The channel stays
	// registered until the supervisor has its own, so no signal is lost in
	// between (as PID 1 an unhandled SIGTERM would be ignored).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var caught os.Signal
	go func() {
		select {
		case s := <-sigs:
			caught = s
			a.log.Info("signal before ray started: giving up enrollment", "signal", s.String())
			cancel()
		case <-ctx.Done():
		}
	}()

	b, err := a.enroll(ctx)
	if err != nil {
		if ctx.Err() != nil && caught != nil {
			return 128 + int(caught.(syscall.Signal))
		}
		var r *enroll.Refusal
		if errors.As(err, &r) {
			a.log.Error("enrollment refused", "status", r.Status, "error", r.Body.Error, "reason", r.Body.Reason)
		} else {
			a.log.Error("enrollment failed", "err", err)
		}
		return 1
	}
	cancel() // ends the pre-Ray signal watcher; the node runs on a fresh context
	return a.serve(b, sigs)
}

// enroll is docs/protocol.md §5 and §6 from the agent's side: open the port-check
// listeners, pin the CA, check the host, POST /enroll, check the answer.
//
// The listeners open first, before any outgoing connection: an outgoing
// connection's ephemeral source port can be one of the 64 (vast hands out
// ports inside Linux's ephemeral range), and then the listen would fail.
func (a *agent) enroll(ctx context.Context) (*bundle.Bundle, error) {
	a.portKey = make([]byte, 32)
	if _, err := rand.Read(a.portKey); err != nil {
		return nil, fmt.Errorf("port key: %w", err)
	}
	listeners, err := portcheck.Listen("", a.cfg.Ports, a.portKey, a.log)
	if err != nil {
		return nil, err
	}
	defer listeners.Close() // success or failure: the ports go to Ray next

	retry := backoff.RetryConfig{Log: a.log}
	ca, err := backoff.Retry(ctx, retry, "fetch ca.pem", func(ctx context.Context) (*x509.Certificate, error) {
		return enroll.FetchCA(ctx, a.headA, a.cfg.CASHA256)
	})
	if err != nil {
		return nil, err
	}
	a.ca = ca
	a.log.Info("pinned cluster CA", "sha256", a.cfg.CASHA256)

	resolvers, err := parseResolvers(a.cfg.EgressResolvers)
	if err != nil {
		return nil, fmt.Errorf("env %s: %w", wire.EnvEgressResolvers, err)
	}
	a.checks = hostcheck.Run(ctx, hostcheck.Config{Root: "/", PublicIP: a.cfg.PublicIP.String(), Resolvers: resolvers, Log: a.log})
	var v hostcheck.RayVersions
	select {
	case v = <-a.versions:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	a.checks.RayVersion, a.checks.PythonVersion = v.Ray, v.Python

	req := wire.EnrollRequest{Version: wire.Version, InstanceID: a.cfg.InstanceID, JoinToken: a.cfg.JoinToken.Reveal(),
		Checks: a.checks.Checks, GPUs: a.checks.GPUs, GPUModels: a.checks.GPUModels,
		RayVersion: v.Ray, PythonVersion: v.Python,
		Ports: a.cfg.Ports, PortKey: base64.StdEncoding.EncodeToString(a.portKey)}
	hc := enroll.HTTPClient(enroll.TLSConfig(ca, a.cfg.Head, nil), 60*time.Second) // the head's port check takes up to 10 s
	url := "https://" + a.headA.String() + "/enroll"
	a.log.Info("enrolling", "url", url, "gpus", req.GPUs, "gpu_models", req.GPUModels, "ray_version", req.RayVersion, "python_version", req.PythonVersion)
	resp, err := backoff.Retry(ctx, retry, "enroll", func(ctx context.Context) (wire.EnrollResponse, error) {
		return enroll.Enroll(ctx, hc, url, req)
	})
	if err != nil {
		return nil, err
	}
	if err := listeners.Close(); err != nil {
		a.log.Warn("closing port-check listeners", "err", err)
	}
	b, err := bundle.Parse(resp, ca, a.cfg.InstanceID, a.cfg.Ports)
	if err != nil {
		return nil, err
	}
	a.log.Info("enrolled", "app_id", b.AppID, "node_ip", b.Ray.NodeIPAddress, "heartbeat_port", b.Heartbeat.Port, "interval", b.HeartbeatInterval())
	return b, nil
}

// probeRay asks the found Python for Ray's and its own version (docs/protocol.md §5),
// once, in Ray's scrubbed environment. The head judges the answer; an
// unknown version is sent as "" and refused there as ray_version, so the
// reason reaches the operator through head status.
func (a *agent) probeRay(ctx context.Context) <-chan hostcheck.RayVersions {
	out := make(chan hostcheck.RayVersions, 1)
	env := raylaunch.Scrubbed(os.Environ(), a.secrets(nil)) // before enrolling: no bundle secrets yet
	go func() {
		v, err := hostcheck.ProbeRay(ctx, hostcheck.RayProbe{Python: a.cfg.Python, Env: env})
		if err != nil {
			a.log.Warn("ray version probe failed: the head will refuse this node as ray_version", "err", err)
		}
		a.log.Info("ray version", "python", a.cfg.Python, "ray_version", v.Ray, "python_version", v.Python)
		out <- v
	}()
	return out
}

// headClient talks to port B with the node cert.
func (a *agent) headClient(b *bundle.Bundle) (*http.Client, string) {
	hc := enroll.HTTPClient(enroll.TLSConfig(a.ca, a.cfg.Head, &b.NodeCert), 15*time.Second)
	return hc, "https://" + netip.AddrPortFrom(a.cfg.Head, uint16(b.Heartbeat.Port)).String()
}
