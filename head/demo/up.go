package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

// makeWorkDir makes the temp dir of the head's log and config, and the
// state dir's place unless --state.
func (d *demo) makeWorkDir() error {
	dir, err := os.MkdirTemp("", "rayvast-demo-")
	if err != nil {
		return err
	}
	d.workDir = dir
	d.stateDir = filepath.Join(dir, "state")
	if d.o.state != "" {
		d.stateDir = d.o.state
	}
	d.logFile, err = os.Create(filepath.Join(dir, "head.log"))
	return err
}

// config is the demo's built-in head config: two node types of no GPU,
// rented from Docker, the Ray head on the network's gateway.
func (d *demo) config(gw string) wire.Config {
	nt := func(n int) wire.NodeType {
		return wire.NodeType{GPUs: 0, MaxWorkers: n, Resources: map[string]float64{}, Labels: map[string]string{"demo": "true"}}
	}
	return wire.Config{
		Cluster:            d.o.cluster,
		Ray:                wire.RayHead{HeadAddress: net.JoinHostPort(gw, "6379")},
		NodeTypes:          map[string]wire.NodeType{safeType: nt(2), unsafeType: nt(1)},
		GuestAPI:           wire.GuestAPIPolicy{AnonymousScopes: []string{"guest:version", "guest:health"}},
		Provider:           &wire.ProviderConfig{Kind: wire.ProviderDocker},
		HeartbeatIntervalS: d.o.interval,
	}
}

// startUp runs `head up` on the demo config in its own process group
// (Ctrl-C reaches the demo only, which then stops the head in order). Its
// Ray head is real Ray from the demo's venv, or with --ray stand-in the
// stand-in ray of the candidate image (--fakeray; with none found, the
// demo runs without a Ray head of its own).
func (d *demo) startUp(ctx context.Context, gw, agent, boot, img string) (*adminclient.Client, error) {
	cfgPath := filepath.Join(d.workDir, "config.json")
	b, _ := json.MarshalIndent(d.config(gw), "", "  ")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		return nil, err
	}
	portA, err := freePort(gw)
	if err != nil {
		return nil, err
	}
	portB, err := freePort(gw)
	if err != nil {
		return nil, err
	}
	args := []string{"up", "--config", cfgPath, "--state", d.stateDir, "--bootloader", boot,
		"--listen-a", net.JoinHostPort(gw, portA), "--listen-b", net.JoinHostPort(gw, portB)}
	if agent != "" {
		args = append(args, "--agent", agent)
	}
	env := append(os.Environ(), docker.EnvImage+"="+img, docker.EnvUnsafeNodeTypes+"="+unsafeType)
	var rayHead string
	if d.python != "" {
		args = append(args, "--python", d.python)
		env = append(env, "RAY_USAGE_STATS_ENABLED=0")
		rayHead = "real Ray " + d.rayVersion + " (" + d.python + ")"
	} else {
		fakeray := d.o.fakeray
		if fakeray == "" {
			fakeray, _ = candidateimage.FindFakeray()
		}
		rayHead = "the stand-in ray of " + fakeray
		if fakeray != "" {
			env = append(env, "PYTHONPATH="+fakeray, "FAKERAY_RECORD="+filepath.Join(d.workDir, "ray-head-record.json"))
		} else {
			args = append(args, "--no-ray-head")
			rayHead = "none (no stand-in ray found: --fakeray DIR)"
		}
	}
	args = append(args, d.o.serveArgs...)
	cmd := exec.Command(d.exe, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = d.logFile, d.logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("head up: %w", err)
	}
	d.serve = cmd
	d.serveDone = make(chan struct{})
	go func() { _ = cmd.Wait(); close(d.serveDone) }()

	admin := newAdminClient(filepath.Join(d.stateDir, statedir.AdminSocket))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := admin.Candidates(ctx); err == nil {
			break
		} else if time.Now().After(deadline) {
			return nil, fmt.Errorf("head up did not answer on admin.sock: %v (log: %s)", err, d.logFile.Name())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-d.serveDone:
			return nil, fmt.Errorf("head up exited: %v (log: %s)", cmd.ProcessState, d.logFile.Name())
		case <-time.After(200 * time.Millisecond):
		}
	}
	d.say("· head up (built-in demo config, provider docker): state %s", d.stateDir)
	d.say("  port A %s:%s, port B %s:%s; Ray head at %s:6379: %s", gw, portA, gw, portB, gw, rayHead)
	return admin, nil
}
