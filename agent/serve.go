package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/agent/bundle"
	"github.com/rayvast/rayvast/agent/guestapi"
	"github.com/rayvast/rayvast/agent/heartbeat"
	"github.com/rayvast/rayvast/agent/mesh"
	"github.com/rayvast/rayvast/agent/raylaunch"
	"github.com/rayvast/rayvast/agent/raylife"
	"github.com/rayvast/rayvast/agent/supervise"
	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// serve is docs/protocol.md §9: write the bundle, open the guest API, start Ray under
// the supervisor, heartbeat until Ray exits, and return Ray's exit code.
// sigs is the pre-Ray signal channel, drained once the supervisor owns signals.
func (a *agent) serve(b *bundle.Bundle, sigs chan os.Signal) int {
	paths, err := bundle.Write(a.cfg.State, b, bundle.Switches{PublicLogs: a.cfg.PublicLogs,
		PublicSysinfo: a.cfg.PublicSysinfo, PublicTCBInfo: a.cfg.PublicTCBInfo})
	if err != nil {
		a.log.Error("writing bundle", "err", err)
		return 1
	}
	hc, portB := a.headClient(b)
	// One channel asks the heartbeat loop for a beat now: the mesh's (a
	// node it does not know yet) and Ray's (it exited: a drain?).
	a.meshKick = make(chan chan struct{})
	m, meshAddr := a.startMesh(b)
	a.meshAddr = meshAddr
	sup := supervise.New(supervise.Config{Log: a.log})
	reports := raylife.NewReports(func(event, detail string) { a.report(hc, portB, b, event, detail) }, a.log)
	ray := raylife.New(raylife.Config{
		Supervisor: sup,
		Policy:     raylife.Policy(a.cfg.Restart),
		Command: func(joined func()) (*exec.Cmd, func(), error) {
			return a.rayCommand(b, paths, joined) // a pure function of the bundle and env: the same argv and env each time
		},
		Report:    reports.Add,
		LastWords: a.rayLastWords,
		Beat:      func(ctx context.Context) { beatNow(ctx, a.meshKick) },
		Log:       a.log,
	})

	srv, err := a.guestAPI(b, ray)
	if err != nil {
		a.log.Error("guest api refused to start", "err", err)
		a.report(hc, portB, b, "guest_api_refused", err.Error())
		return 1
	}
	defer srv.Close()
	if err := a.serveGuestAPI(srv, b.GuestAPI.Port, paths.Socket); err != nil {
		a.log.Error("guest api cannot listen", "err", err)
		a.report(hc, portB, b, "guest_api_refused", err.Error())
		return 1
	}

	if err := ray.Start(); err != nil {
		a.log.Error("starting ray", "err", err)
		a.report(hc, portB, b, wire.EventRayExited, "ray did not start: "+err.Error())
		return 1
	}
	a.log.Info("ray started", "pid", sup.PID(), "since_exec", time.Since(execTime).Round(time.Millisecond))
	select { // a stop signal that came before the supervisor listened
	case s := <-sigs:
		a.log.Info("signal while ray started: stopping it", "signal", s.String())
		sup.Stop()
	default:
	}
	signal.Stop(sigs)
	return a.watch(sup, ray, reports, hc, portB, b, m)
}

// watch heartbeats while Ray runs (restarted by the loop when it exits on
// its own), reports signals and Ray's end, and returns the exit code once
// Ray is gone for good.
func (a *agent) watch(sup *supervise.Supervisor, ray *raylife.Ray, reports *raylife.Reports, hc *http.Client, portB string, b *bundle.Bundle, m *mesh.Mesh) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			select {
			case s := <-sup.Signalled():
				a.log.Info("stopping on signal", "signal", s.String())
				go a.report(hc, portB, b, wire.EventStopping, "signal "+s.String())
			case <-ctx.Done():
				return
			}
		}
	}()
	var hm heartbeat.Mesh // a nil *mesh.Mesh must stay a nil interface
	if m != nil {
		hm = m
	}
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		_ = heartbeat.Run(ctx, heartbeat.Config{
			Mesh:   hm,
			Client: hc, BaseURL: portB, InstanceID: b.InstanceID, Interval: b.HeartbeatInterval(),
			Status: ray.Status,
			HealthToken: func(now time.Time) string {
				tok, err := guestauth.MintHealthToken(b.AppID, b.AppRootKey.Reveal(), now)
				if err != nil {
					a.log.Warn("minting health token", "err", err)
				}
				return tok
			},
			OnStop:    func() { a.log.Info("head asked to stop ray"); sup.Stop() },
			OnRayHead: ray.RayHead,
			OnDrain:   ray.Drain,
			Kick:      a.meshKick,
			OnBeat:    a.selfEndOnBeat(b, sup), // the head gone: end the rental (agent/selfend)
			Final:     ray.Final(),             // one last beat carries Ray's exit code
			Log:       a.log,
		})
	}()

	code, crashloop := ray.Run()
	if !crashloop { // a crash loop was reported; the head ends the node on it
		a.log.Info("ray exited", "exit_code", code)
		reports.Add(wire.EventRayExited, "exit code "+strconv.Itoa(code))
	}
	reports.Close(30 * time.Second)
	select { // the last heartbeat, bounded: the head may be away
	case <-beating:
	case <-time.After(20 * time.Second):
	}
	cancel()
	return code
}

// beatNow asks the heartbeat loop for a beat through kick and waits for
// its answer, or for ctx to end.
func beatNow(ctx context.Context, kick chan<- chan struct{}) {
	done := make(chan struct{})
	select {
	case kick <- done:
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// rayCommand builds Ray's exec.Cmd: argv and env from raylaunch, output
// through a pipe we copy to our stderr and /logs/ray (the supervisor wants
// *os.File stdio: it never calls Wait, which would end copy goroutines),
// calling joined when Ray says its node is in the cluster.
// Call started after Start: it closes our copy of the pipe's write end.
func (a *agent) rayCommand(b *bundle.Bundle, p bundle.Paths, joined func()) (cmd *exec.Cmd, started func(), err error) {
	tmp, cpus, err := a.rayPlacement(b)
	if err != nil {
		return nil, nil, err
	}
	argv, env := raylaunch.Command(raylaunch.Params{
		Python: a.cfg.Python, Ray: b.Ray, NumCPUs: cpus, TempDir: tmp,
		CandidateID: b.CandidateID, NodeType: b.NodeType,
		NodeCert: p.NodeCert, NodeKey: p.NodeKey, CACert: p.CACert, ClusterTokenPath: p.ClusterToken, ShimDir: p.ShimDir,
		MeshAddr: a.meshAddr, Iface: a.rayIface,
		Env: os.Environ(), Secrets: a.secrets(b),
	})
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, nil, fmt.Errorf("ray python %q: %w", argv[0], err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("ray output pipe: %w", err)
	}
	cmd = &exec.Cmd{Path: path, Args: argv, Env: env, Stdout: w, Stderr: w}
	go func() {
		raylife.CopyOutput(r, io.MultiWriter(a.stderr, a.rayLog), joined)
		r.Close()
	}()
	a.log.Info("starting ray", "python", path, "args", argv[1:])
	// Our copy of the write end must close once Ray has its own, or the
	// reader never sees EOF; exec.Cmd closes only files it opened itself.
	return cmd, func() { w.Close() }, nil
}

// rayLastWords is the end of Ray's output, for a report: the last few
// lines, at most 1 KiB, as plain text.
func (a *agent) rayLastWords() string {
	b, _ := a.rayLog.Tail(1 << 10)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 1 {
		lines = lines[1:] // the first may be cut
	}
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, " | ")
}

// rayPlacement is Ray's --temp-dir and --num-cpus, decided once so every
// restart of Ray gets the same argv (a fallback temp dir is random).
func (a *agent) rayPlacement(b *bundle.Bundle) (tempDir string, cpus int, err error) {
	a.placeOnce.Do(func() {
		a.rayTempDir, a.placeErr = raylaunch.TempDir(a.cfg.State, "")
		a.rayCPUs = raylaunch.RayCPUs(b.Ray.NumCPUs, raylaunch.ContainerCPUs(raylaunch.CPUConfig{}))
	})
	return a.rayTempDir, a.rayCPUs, a.placeErr
}

// secrets is every secret the agent holds, in every form a copy could
// take (secret.AllForms), so that none reaches Ray's or the version
// probe's env: the environment's, the port-check key and, once enrolled
// (b not nil; nil before enrollment), the bundle's.
func (a *agent) secrets(b *bundle.Bundle) []string {
	all := append(a.cfg.Secrets(), secret.NewBytes(a.portKey))
	if b != nil {
		all = append(all, b.Secrets()...)
	}
	return secret.AllForms(all...)
}

// guestAPI builds the guest API server from the bundle and the env's
// measured switches. A bad policy (unknown scope, bad key) refuses to start.
func (a *agent) guestAPI(b *bundle.Bundle, ray *raylife.Ray) (*guestapi.Server, error) {
	checks := a.checks
	return guestapi.New(guestapi.Config{
		AppID: b.AppID, AppRootKey: b.AppRootKey,
		PublicLogs: a.cfg.PublicLogs, PublicSysinfo: a.cfg.PublicSysinfo, PublicTCBInfo: a.cfg.PublicTCBInfo,
		Policy:      b.GuestAPI.GuestAPIPolicy,
		NodeCertPEM: b.NodeCertPEM, NodeKeyPEM: b.NodeKeyPEM, CACertPEM: b.CACertPEM,
		TrustedIP: a.cfg.Head, // the head's health polls keep room of their own
		Logs:      map[string]guestapi.LogSource{"agent": a.agentLog, "ray": a.rayLog},
		Processes: func() []guestapi.Process {
			st := ray.Status()
			return []guestapi.Process{{Name: "ray", PID: st.PID, State: st.State, Restarts: st.Restarts}}
		},
		TCB:     func() wire.GuestTCB { return wire.GuestTCB{Checks: &checks, AgentSHA256: a.selfSum} },
		Version: version,
		Log:     a.log,
	})
}

// serveGuestAPI listens on the guest API port (all addresses, HTTPS with
// the node cert) and on the local Unix socket.
func (a *agent) serveGuestAPI(srv *guestapi.Server, port int, socket string) error {
	l, err := guestapi.Listen(net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	go func() {
		if err := srv.ServeTCP(l); err != nil {
			a.log.Error("guest api stopped", "err", err)
		}
	}()
	go func() {
		if err := srv.ServeUnix(socket); err != nil {
			a.log.Error("guest api socket stopped", "err", err)
		}
	}()
	a.log.Info("guest api listening", "port", port, "socket", socket)
	return nil
}

// report sends one event to port B, retrying briefly: the agent is about
// to exit and must not hang on an absent head.
func (a *agent) report(hc *http.Client, portB string, b *bundle.Bundle, event, detail string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep := wire.Report{Version: wire.Version, InstanceID: b.InstanceID, Event: event, Detail: detail}
	retry := backoff.RetryConfig{Log: a.log, MaxElapsed: 20 * time.Second}
	_, err := backoff.Retry(ctx, retry, "report "+event, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, heartbeat.Report(ctx, hc, portB, rep)
	})
	if err != nil {
		a.log.Warn("report not delivered", "event", event, "err", err)
		return
	}
	a.log.Info("reported", "event", event, "detail", detail)
}
