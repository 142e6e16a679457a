package shim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// vastNAT is vast's network in two namespaces the test makes: the head's
// (10.200.0.1) and the node's (its own IP 10.200.0.2, default route to the
// head's). The node's public IP 203.0.113.7 is on no interface; the head's
// namespace forwards public IP:port to the node (nftables DNAT, as vast's
// router does) and refuses the node's own connections to its public IP (no
// hairpin NAT, as on many vast hosts).
const vastNATSetup = `set -e
ip link add v1 netns "$H" type veth peer name v0 netns "$N"
ip -n "$H" link set lo up; ip -n "$H" addr add 10.200.0.1/24 dev v1; ip -n "$H" link set v1 up
ip -n "$N" link set lo up; ip -n "$N" addr add 10.200.0.2/24 dev v0; ip -n "$N" link set v0 up
ip -n "$N" route add default via 10.200.0.1
ip -n "$H" route add 203.0.113.7/32 dev v1
ip netns exec "$H" sysctl -qw net.ipv4.ip_forward=1
ip netns exec "$H" nft -f - <<'NFT'
table ip vast {
	chain forward_ports { type nat hook output priority -100; ip daddr 203.0.113.7 dnat to 10.200.0.2; }
	chain no_hairpin { type filter hook forward priority 0; ip daddr 203.0.113.7 reject with tcp reset; }
}
NFT
`

// vastNATResult is what the head side printed and the node side did.
type vastNATResult struct {
	HeadStarted bool   `json:"head_started"`
	NodeAlive   bool   `json:"node_alive"`
	TaskNodeIP  string `json:"task_node_ip"`
	TaskError   string `json:"task_error"`
	NodeStarted bool   `json:"-"` // `ray start` said the node runs
	NodeExited  bool   `json:"-"`
	NodeLog     string `json:"-"`
}

// TestRealRayBehindVastNAT is the differential test of the stand-in: the
// agent's `ray start` for a node whose public IP is on no interface and no
// hairpin NAT, joining a Ray head across vast's port forward, run with real
// Ray (oldest and newest) and with the stand-in, with and without the shim.
// Without the shim the node does not work; with the shim head ships it
// starts, stays up, and real Ray runs a task on it at its public IP. Real
// Ray and the stand-in must agree on both.
func TestRealRayBehindVastNAT(t *testing.T) {
	needRoot(t, "unshare", "ip", "nft")
	needPython(t)
	builtIn := t.TempDir()
	content, libs := Default()
	if len(libs) == 0 {
		var err error
		if content, err = Assemble([][]byte{mustRead(t, buildNative(t, "native"))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(builtIn, Name), content, 0o644); err != nil {
		t.Fatal(err)
	}
	fakeray, err := filepath.Abs("../../test/fakeray")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", filepath.Join(fakeray, "build-natives.sh")).CombinedOutput(); err != nil {
		t.Fatalf("fakeray natives: %v\n%s", err, out)
	}
	type impl struct{ name, python, standin, started string }
	impls := []impl{{"stand-in", "python3", fakeray, "fakeray started"}}
	for _, v := range []string{rvtest.RayOldest, rvtest.RayNewest} {
		impls = append(impls, impl{"real Ray " + v, rvtest.RayPython(t, v), "", "Ray runtime started."})
	}
	for _, shim := range []struct {
		name, dir string
		works     bool
	}{{"without the shim", "", false}, {"with the shim", builtIn, true}} {
		t.Run(shim.name, func(t *testing.T) {
			got := map[string]bool{}
			for _, im := range impls {
				r := runBehindVastNAT(t, im.python, shim.dir, im.standin, im.started)
				works := r.NodeStarted && !r.NodeExited && (im.standin != "" || r.TaskNodeIP == "203.0.113.7")
				got[im.name] = works
				if works != shim.works {
					t.Errorf("%s: node works %v, want %v (started %v, exited %v, task at %q %s)\nnode log:\n%s",
						im.name, works, shim.works, r.NodeStarted, r.NodeExited, r.TaskNodeIP, r.TaskError, r.NodeLog)
				}
			}
			for _, im := range impls[1:] {
				if got[im.name] != got[impls[0].name] {
					t.Errorf("the stand-in and %s disagree %s: %v vs %v", im.name, shim.name, got[impls[0].name], got[im.name])
				}
			}
		})
	}
}

var netnsSeq atomic.Int32

// runBehindVastNAT makes vastNAT's namespaces, runs the head side, then the
// node side, each with python in a PID namespace of its own (every Ray
// process dies with it), and returns what happened.
func runBehindVastNAT(t *testing.T, python, shimDir, standin, startedLine string) vastNATResult {
	t.Helper()
	h := fmt.Sprintf("rv%dh%d", os.Getpid()%100000, netnsSeq.Add(1))
	n := h[:len(h)-len(fmt.Sprint(netnsSeq.Load()))-1] + "n" + fmt.Sprint(netnsSeq.Load())
	for _, ns := range []string{h, n} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", ns, err, out)
		}
		defer exec.Command("ip", "netns", "del", ns).Run()
	}
	setup := exec.Command("sh", "-c", vastNATSetup)
	setup.Env = append(os.Environ(), "H="+h, "N="+n)
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("vast network: %v\n%s", err, out)
	}
	script, err := filepath.Abs("testdata/realray_vastnet.py")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "NODE_PYTHONPATH=" + shimDir, "STANDIN_PYTHONPATH=" + standin,
		"STARTED_LINE=" + startedLine, "WAIT_S=30"}
	headSide := startSide(t, h, python, script, "head", env)
	defer headSide.stop()
	var r vastNATResult
	if line := headSide.next(2*time.Minute, "HEAD READY", "{"); line != "HEAD READY" {
		t.Fatalf("the Ray head did not start: %s\n%s", line, headSide.log.String())
	}
	r.HeadStarted = true
	nodeSide := startSide(t, n, python, script, "node", env)
	defer nodeSide.stop()
	switch line := nodeSide.next(90*time.Second, "NODE STARTED", "NODE EXITED"); {
	case line == "NODE STARTED":
		r.NodeStarted = true
		// A node that starts and then dies (Ray behind a NAT it cannot
		// cross) shows it within seconds.
		r.NodeExited = nodeSide.next(15*time.Second, "NODE EXITED") != ""
	case strings.HasPrefix(line, "NODE EXITED"):
		r.NodeExited = true
	}
	if standin == "" && r.NodeStarted && !r.NodeExited {
		if line := headSide.next(2*time.Minute, "{"); line != "" {
			json.Unmarshal([]byte(line), &r)
		}
	}
	nodeSide.stop()
	r.NodeLog = lastLines(nodeSide.log.String(), 15)
	t.Logf("node started %v, exited %v, alive in Ray %v, task at %q %s", r.NodeStarted, r.NodeExited, r.NodeAlive, r.TaskNodeIP, r.TaskError)
	return r
}

// side is one namespace's process and the lines it printed.
type side struct {
	cmd   *exec.Cmd
	stdin io.Closer
	lines chan string
	log   *rvtest.Buffer
	once  sync.Once
}

func startSide(t *testing.T, ns, python, script, role string, env []string) *side {
	t.Helper()
	tmp, err := os.MkdirTemp("", "rv") // short: Ray's AF_UNIX sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	s := &side{lines: make(chan string, 100), log: &rvtest.Buffer{}}
	s.cmd = exec.Command("ip", "netns", "exec", ns, "unshare", "-p", "-f", "-m", "--mount-proc", python, script, role, tmp)
	s.cmd.Env = env
	s.cmd.Stderr = s.log
	s.cmd.WaitDelay = 5 * time.Second
	stdin, _ := s.cmd.StdinPipe()
	stdout, _ := s.cmd.StdoutPipe()
	s.stdin = stdin
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			s.log.Write([]byte(sc.Text() + "\n"))
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	return s
}

// next waits for a line starting with one of prefixes; "" at the limit or
// when the process ends first.
func (s *side) next(limit time.Duration, prefixes ...string) string {
	timeout := time.After(limit)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return ""
			}
			for _, p := range prefixes {
				if strings.HasPrefix(l, p) {
					return l
				}
			}
		case <-timeout:
			return ""
		}
	}
}

// stop closes stdin (the side ends), then kills it if it lingers.
func (s *side) stop() {
	s.once.Do(func() {
		s.stdin.Close()
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
