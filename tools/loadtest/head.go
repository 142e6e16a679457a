package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

// head is one `head serve --provider none` process on a fresh state dir.
type head struct {
	dir, state   string
	portA, portB string // host:port
	cmd          *exec.Cmd
	adm          *adminclient.Client
	caPEM        []byte
	cpus         cpus
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func startHead(o options, idx int) (*head, error) {
	dir, err := os.MkdirTemp("", "rayvast-loadtest-")
	if err != nil {
		return nil, err
	}
	h := &head{dir: dir, state: filepath.Join(dir, "state"), cpus: o.cpus}
	if out, err := exec.Command(o.head, "init", "--state", h.state, "--ip", "127.0.0.1", "--cluster", "load").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("head init: %v %s", err, out)
	}
	cfg := `{"cluster":"load","ray":{"head_address":"127.0.0.1:6379"},
	 "node_types":{"cpu":{"gpus":0,"max_workers":100000,"resources":{},"labels":{}}},
	 "guest_api":{"anonymous_scopes":[],"external_issuers":[]},"heartbeat_interval_s":30}`
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600)
	os.WriteFile(filepath.Join(dir, "agent"), []byte("agent"), 0o755)
	if h.portA, err = freePort(); err == nil {
		h.portB, err = freePort()
	}
	if err != nil {
		return nil, err
	}
	log, _ := os.Create(filepath.Join(dir, "head.log"))
	h.cmd = exec.Command(o.head, "serve", "--state", h.state, "--config", filepath.Join(dir, "config.json"),
		"--agent", filepath.Join(dir, "agent"), "--listen-a", h.portA, "--listen-b", h.portB, "--log-level", "warn")
	h.cmd.Stdout, h.cmd.Stderr = log, log
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // a killed loadtest leaves no head behind
	if err := start(h.cmd, h.cpus.server); err != nil {
		return nil, err
	}
	sock := filepath.Join(h.state, statedir.AdminSocket)
	// Its own transport: 32 creations at a time keep their connections.
	h.adm = &adminclient.Client{HTTP: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := h.adm.Nodes(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			h.close(true)
			return nil, fmt.Errorf("head did not start; log in %s", dir)
		}
	}
	h.caPEM, err = os.ReadFile(filepath.Join(h.state, "ca.pem"))
	return h, err
}

func (h *head) pid() int { return h.cmd.Process.Pid }

func (h *head) close(keep bool) {
	h.cmd.Process.Signal(syscall.SIGTERM)
	h.cmd.Wait()
	if !keep {
		os.RemoveAll(h.dir)
	}
}

// nodeIP is node i's loopback address in run r: 127.(20+r).(i/250).(i%250+1).
func nodeIP(r, i int) string { return fmt.Sprintf("127.%d.%d.%d", 20+r, i/250, i%250+1) }

// candidates creates n candidates over the admin API, 32 at a time.
func (h *head) candidates(run, n int) ([]node, error) {
	out := make([]node, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			inst := "load-" + strconv.Itoa(run) + "-" + strconv.Itoa(i)
			ip := nodeIP(run, i)
			c, err := h.adm.Create(context.Background(), wire.CandidateRequest{NodeType: "cpu", InstanceID: inst, PublicIP: ip, HostID: "h-" + inst})
			if err != nil {
				errs <- fmt.Errorf("create candidate: %w", err)
				return
			}
			out[i] = node{Instance: inst, IP: ip, Token: c.JoinToken}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return out, nil
}

// bareServer is the reference server process: heartbeats on addr,
// enrollments on enrollAddr.
type bareServer struct {
	addr, enrollAddr string
	cmd              *exec.Cmd
}

func startBare(h *head, checks int) (*bareServer, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	enrollAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, "bare", "--ca", filepath.Join(h.state, "ca.pem"), "--ca-key", filepath.Join(h.state, "ca.key"),
		"--cert", filepath.Join(h.state, "head.pem"), "--key", filepath.Join(h.state, "head.key"),
		"--listen", addr, "--listen-enroll", enrollAddr, "--checks", strconv.Itoa(checks))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := start(cmd, h.cpus.server); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if up(addr) && up(enrollAddr) {
			return &bareServer{addr: addr, enrollAddr: enrollAddr, cmd: cmd}, nil
		}
	}
	cmd.Process.Kill()
	return nil, fmt.Errorf("bare server did not start")
}

func up(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	return err == nil
}

func (b *bareServer) pid() int { return b.cmd.Process.Pid }
func (b *bareServer) close()   { b.cmd.Process.Kill(); b.cmd.Wait() }

// bareNodes are n simulated nodes for a storm at the bare server, after
// the head's from in run's address range: no candidate behind them (the
// bare server checks no token), a token of the right length for Validate.
func bareNodes(run, from, n int) []node {
	out := make([]node, n)
	for i := range out {
		inst := "bare-" + strconv.Itoa(run) + "-" + strconv.Itoa(i)
		out[i] = node{Instance: inst, IP: nodeIP(run, from+i), Token: strings.Repeat("b", wire.JoinTokenLen)}
	}
	return out
}
