package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// Short heartbeats so `lost` (3 intervals) comes within seconds.
const heartbeatInterval = 2

// Node types of the suite's config; unsafeType is rented with NET_RAW kept.
const (
	safeType   = "cpu"
	unsafeType = "cpu-unsafe"
)

// cluster is one head process with its own state dir, Docker network and
// containers; all removed at the end of the test.
type cluster struct {
	t        testing.TB
	name     string
	dir      string
	state    string
	gw       string
	args     []string // head serve's
	env      []string
	provider string

	mu      sync.Mutex
	head    *exec.Cmd
	done    chan struct{}
	headLog *rvtest.Buffer
	printed *rvtest.Buffer // what head commands run by the test printed
	admin   *adminclient.Client
}

// newCluster makes the network, runs `head init` and starts `head serve`
// with the given provider ("docker" or "none").
func newCluster(t testing.TB, provider string) *cluster {
	t.Helper()
	needSuite(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("%s%s-%d", clusterPrefix, strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano()%1e6)
	if len(name) > 40 {
		name = name[:40]
	}
	c := &cluster{t: t, name: name, dir: t.TempDir(), provider: provider, headLog: &rvtest.Buffer{}, printed: &rvtest.Buffer{}}
	t.Cleanup(func() {
		c.stopHead()
		if t.Failed() {
			t.Logf("head log of %s:\n%s", name, c.headLog.String())
			c.dumpContainers()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := vastnet.Cleanup(ctx, suite.eng, func(cl string) bool { return cl == name }); err != nil {
			t.Errorf("cleanup %s: %v", name, err)
		}
	})
	netw, _, err := vastnet.EnsureNetwork(ctx, suite.eng, name)
	if err != nil {
		t.Fatal(err)
	}
	c.gw = netw.Gateway.String()
	c.state = filepath.Join(c.dir, "state")
	initCmd := exec.Command(suite.head, "init", "--state", c.state, "--ip", c.gw, "--cluster", name)
	if out, err := initCmd.CombinedOutput(); err != nil {
		t.Fatalf("head init: %v\n%s", err, out)
	}
	cfg := wire.Config{
		Cluster: name,
		Ray:     wire.RayHead{HeadAddress: net.JoinHostPort(c.gw, "6379")},
		NodeTypes: map[string]wire.NodeType{
			safeType:   {GPUs: 0, MaxWorkers: 4, Resources: map[string]float64{}, Labels: map[string]string{}},
			unsafeType: {GPUs: 0, MaxWorkers: 1, Resources: map[string]float64{}, Labels: map[string]string{}},
		},
		GuestAPI:           wire.GuestAPIPolicy{AnonymousScopes: []string{"guest:health"}},
		HeartbeatIntervalS: heartbeatInterval,
	}
	b, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(c.dir, "config.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c.args = []string{"serve", "--state", c.state, "--config", cfgPath, "--agent", suite.agent, "--bootloader", filepath.Join(suite.repo, "bootloader.sh"),
		"--listen-a", net.JoinHostPort(c.gw, freePort(t, c.gw)), "--listen-b", net.JoinHostPort(c.gw, freePort(t, c.gw)),
		"--provider", provider}
	if provider == "none" { // the test's own loopback and namespaces: a private network
		c.args = append(c.args, "--firewall", "off")
	}
	c.env = append(os.Environ(), docker.EnvImage+"="+suite.image, docker.EnvUnsafeNodeTypes+"="+unsafeType)
	sock := filepath.Join(c.state, statedir.AdminSocket)
	c.admin = adminclient.Unix(sock, 10*time.Second)
	c.startHead()
	return c
}

// freePort is a port on ip the head binds next, from outside the ephemeral
// range: the port checks' connections from the gateway IP cannot take it.
func freePort(t testing.TB, ip string) string {
	t.Helper()
	return strconv.Itoa(rvtest.FreePort(t, ip))
}

// startHead starts `head serve` and waits for its admin API.
func (c *cluster) startHead() {
	c.t.Helper()
	cmd := exec.Command(suite.head, c.args...)
	cmd.Env = c.env
	cmd.Stdout, cmd.Stderr = c.headLog, c.headLog
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.mu.Lock()
	c.head, c.done = cmd, done
	c.mu.Unlock()
	waitFor(c.t, 30*time.Second, "head admin API", func() (bool, string) {
		select {
		case <-done:
			c.t.Fatalf("head serve exited: %v\n%s", cmd.ProcessState, c.headLog.String())
		default:
		}
		_, err := c.admin.Candidates(context.Background())
		return err == nil, fmt.Sprint(err)
	})
}

// stopHead sends SIGTERM and waits (SIGKILL after 15 s).
func (c *cluster) stopHead() {
	c.mu.Lock()
	cmd, done := c.head, c.done
	c.head = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		c.t.Errorf("head did not stop on SIGTERM within 15 s")
		_ = cmd.Process.Kill()
		<-done
	}
}

// createCandidate asks the head for a candidate of a node type.
func (c *cluster) createCandidate(nodeType string) wire.CandidateCreated {
	c.t.Helper()
	out, err := c.admin.Create(context.Background(), wire.CandidateRequest{NodeType: nodeType})
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

func (c *cluster) candidate(id string) wire.Candidate {
	c.t.Helper()
	cands, err := c.admin.Candidates(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	for _, x := range cands {
		if x.CandidateID == id {
			return x
		}
	}
	c.t.Fatalf("candidate %s not listed", id)
	return wire.Candidate{}
}

func (c *cluster) node(instanceID string) (wire.Node, bool) {
	nodes, err := c.admin.Nodes(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	for _, n := range nodes {
		if n.InstanceID == instanceID {
			return n, true
		}
	}
	return wire.Node{}, false
}

// waitFor polls cond (rvtest.Until) until it holds; after limit it fails the
// test with cond's last explanation. Limits are generous: they bound a hang,
// they do not measure speed.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var why string
	if !rvtest.Until(limit, func() bool { ok, w := cond(); why = w; return ok }) {
		t.Fatalf("waited %s for %s: %s", limit, what, why)
	}
}

// dumpContainers logs every container of the cluster with its logs, for a
// failed test.
func (c *cluster) dumpContainers() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := suite.eng.ListContainers(ctx, vastnet.LabelCluster+"="+c.name)
	if err != nil {
		return
	}
	for _, ct := range cs {
		out, errOut, _ := suite.eng.ContainerLogs(ctx, ct.ID)
		c.t.Logf("container %v (%s):\n%s%s", ct.Names, ct.Status, out, errOut)
	}
}

// deleteCandidate ends a candidate (its container is removed by the head).
func (c *cluster) deleteCandidate(id string) (bool, error) {
	err := c.admin.End(context.Background(), id)
	return err == nil, err
}
