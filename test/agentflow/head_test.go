package agentflow

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// head is a running `head serve` and a client for its admin socket.
type head struct {
	state  string
	stderr *rvtest.Buffer
	admin  *adminclient.Client
	bin    string
	args   []string
	cmd    *exec.Cmd
	done   chan struct{}
}

// startHead runs head init and head serve on ip with a 1 s heartbeat and
// the built-in shim, and stops it (SIGTERM) at cleanup.
func startHead(t *testing.T, bin, agentBin, tmp, ip string) *head {
	t.Helper()
	state := filepath.Join(tmp, "head-state")
	if out, err := exec.Command(bin, "init", "--state", state, "--ip", ip, "--cluster", "e2e").CombinedOutput(); err != nil {
		t.Fatalf("head init: %v\n%s", err, out)
	}
	cfg := fmt.Sprintf(`{"cluster":"e2e","ray":{"head_address":"%s:6379","version":"2.53.0"},
 "node_types":{"cpu":{"gpus":0,"max_workers":1,"resources":{"e2e":1},"labels":{"kind":"e2e"}}},
 "guest_api":{"anonymous_scopes":["guest:health"],"external_issuers":[]},
 "heartbeat_interval_s":1}`, ip)
	cfgPath := filepath.Join(tmp, "head.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &head{state: state, stderr: &rvtest.Buffer{}}
	h.args = []string{"serve", "--state", state, "--config", cfgPath, "--agent", agentBin, // the built-in shim
		"--listen-a", net.JoinHostPort(ip, fmt.Sprint(freePort(t, ip))),
		"--listen-b", net.JoinHostPort(ip, fmt.Sprint(freePort(t, ip))),
		"--firewall", "off"} // the test's own namespaces: a private network
	h.bin = bin
	sock := filepath.Join(state, statedir.AdminSocket)
	h.admin = adminclient.Unix(sock, 10*time.Second)
	h.start(t)
	t.Cleanup(h.stop)
	return h
}

// start runs head serve with the same state, config and addresses.
func (h *head) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(h.bin, h.args...)
	cmd.Stdout, cmd.Stderr = h.stderr, h.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	h.cmd, h.done = cmd, done
	for i := 0; ; i++ {
		_, err := h.admin.Candidates(context.Background())
		if err == nil {
			return
		}
		select {
		case <-done:
			t.Fatalf("head serve exited:\n%s", h.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
		if i > 150 {
			t.Fatalf("head admin socket not answering: %v\n%s", err, h.stderr.String())
		}
	}
}

// stop ends head serve with SIGTERM (SIGKILL after 10 s).
func (h *head) stop() {
	if h.cmd == nil {
		return
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		h.cmd.Process.Kill()
		<-h.done
	}
	h.cmd = nil
}

func (h *head) createCandidate(t *testing.T, publicIP string) wire.CandidateCreated {
	t.Helper()
	c, err := h.admin.Create(context.Background(), wire.CandidateRequest{NodeType: "cpu", InstanceID: instanceID, PublicIP: publicIP, HostID: "host-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// secrets are the head's cluster token and app root key, from its state.
func (h *head) secrets(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.state, "secrets.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		ClusterToken string `json:"cluster_token"`
		AppRootKey   string `json:"app_root_key"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"cluster token": s.ClusterToken, "app root key": s.AppRootKey}
}

func (h *head) nodes(t *testing.T) []wire.Node {
	t.Helper()
	ns, err := h.admin.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// waitNode polls GET /v1/nodes until our node satisfies ok (30 s at most).
func (h *head) waitNode(t *testing.T, ok func(wire.Node) bool) wire.Node {
	t.Helper()
	var last wire.Node
	rvtest.WaitFor(t, 30*time.Second, func() error {
		for _, n := range h.nodes(t) {
			if n.InstanceID == instanceID {
				if last = n; ok(n) {
					return nil
				}
			}
		}
		return fmt.Errorf("node never reached the expected state; last seen %+v", last)
	})
	return last
}
