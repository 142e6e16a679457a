package meshnet

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/mesh"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// nodeEnv makes this test binary a node's mesh (run inside its namespace):
// its value is the node's instance ID; the files are named below.
const nodeEnv = "RVMESHNET_NODE"

func TestMain(m *testing.M) {
	if id := os.Getenv(nodeEnv); id != "" {
		os.Exit(runNode(id))
	}
	if os.Getenv(streamsEnv) != "" {
		os.Exit(runStreamsPeer())
	}
	if os.Getenv(benchPeerEnv) != "" {
		os.Exit(runBenchPeer())
	}
	os.Exit(m.Run())
}

// runNode serves a mesh as the agent does (agent/meshstart.go) until stdin
// closes, printing its question address first.
func runNode(id string) int {
	dir := os.Getenv("RVMESHNET_DIR")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, id+"."+name))
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		return b
	}
	kp, err := tls.X509KeyPair(read("crt"), read("key"))
	ca, err2 := pki.ParseCert(read("ca"))
	var mm wire.MeshMembers
	err3 := json.Unmarshal(read("members"), &mm)
	port, _ := strconv.Atoi(os.Getenv("RVMESHNET_PORT"))
	local, err4 := netip.ParseAddr(os.Getenv("RVMESHNET_LOCAL"))
	for _, e := range []error{err, err2, err3, err4} {
		if e != nil {
			fmt.Println("ERR", e)
			return 1
		}
	}
	m := mesh.New(mesh.Config{Self: id, Cert: kp, CA: ca, Local: local, MeshPort: port,
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	m.Update(mm)
	peers, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	ask, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	go m.ServePeers(peers)
	go m.ServeLocal(ask)
	// RVMESHNET_CPUPROFILE (a directory) writes this node's CPU profile
	// there for its whole life: where a mesh's CPU per GiB goes (issue 41).
	// Test-only: the agent itself has no such switch.
	if dir := os.Getenv("RVMESHNET_CPUPROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, id+".pprof"))
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	fmt.Println("ASK", ask.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// cluster is the network with a mesh on each of its two nodes.
type cluster struct {
	net      *vastNet
	dir      string
	ca       *pki.CA
	ask      []string // each node's mesh question address
	pids     []int    // each node's mesh process
	logs     []*strings.Builder
	store    int    // rendezvous ports used
	timeoutS string // RANK_TIMEOUT_S for the next ranks ("" default)
	// pin puts node i's mesh and ranks on CPU i (the benchmark: on a
	// shared 2-core machine each node gets a core of its own, as each
	// rental has; unpinned, the nodes and ranks fight for both cores).
	pin bool
	// rankCPUs, when set, pins rank r to rankCPUs[r] instead (two ranks on
	// one node, each on a core: the benchmark's gloo-only reference).
	rankCPUs []int
}

// inNS is argv run in namespace ns, on CPU cpu alone when cpu >= 0
// (taskset execs, so the pid is argv's own process: its /proc stat is
// the process measured).
func inNS(ns string, cpu int, argv ...string) *exec.Cmd {
	args := []string{"netns", "exec", ns}
	if cpu >= 0 {
		args = append(args, "taskset", "-c", strconv.Itoa(cpu%runtime.NumCPU()))
	}
	return exec.Command("ip", append(args, argv...)...)
}

// cpuOf is the CPU node i's processes are pinned to, or -1.
func (c *cluster) cpuOf(i int) int {
	if !c.pin {
		return -1
	}
	return i
}

func ids(i int) string { return fmt.Sprintf("node%d", i) }

// startCluster starts the meshes of both nodes; members lists the nodes
// the meshes know (all when nil).
func startCluster(t testing.TB, v *vastNet) *cluster {
	t.Helper()
	return startClusterPinned(t, v, false)
}

// startClusterPinned is startCluster with each node on its own CPU when
// pin is set (cluster.pin).
func startClusterPinned(t testing.TB, v *vastNet, pin bool) *cluster {
	t.Helper()
	dir := t.TempDir()
	ca, _, err := pki.NewCA(nil, "meshnet", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{net: v, dir: dir, ca: ca, pin: pin}
	var mm wire.MeshMembers
	mm.Version = "1"
	for i, n := range v.nodes[:2] {
		var ports []int
		for p := n.firstPort; p < n.firstPort+64; p++ {
			ports = append(ports, p)
		}
		mm.Peers = append(mm.Peers, wire.MeshMember{InstanceID: ids(i), PublicIP: n.public, MeshPort: n.meshPort(), Ports: ports})
	}
	members, _ := json.Marshal(mm)
	for i, n := range v.nodes[:2] {
		is, err := ca.IssueNode(nil, pki.NodeRequest{InstanceID: ids(i), PublicIP: netip.MustParseAddr(n.public), Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"crt": is.CertPEM, "key": is.KeyPEM.Reveal(), "ca": ca.CertPEM, "members": members} {
			if err := os.WriteFile(filepath.Join(dir, ids(i)+"."+name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cmd := inNS(n.ns, c.cpuOf(i), os.Args[0])
		cmd.Env = append(os.Environ(), nodeEnv+"="+ids(i), "RVMESHNET_DIR="+dir,
			"RVMESHNET_PORT="+strconv.Itoa(n.meshPort()), "RVMESHNET_LOCAL="+n.private)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		logs := &strings.Builder{}
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); cmd.Wait() })
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ASK ")
		if !ok {
			t.Fatalf("mesh of %s: %q", ids(i), line)
		}
		c.ask = append(c.ask, addr)
		c.pids = append(c.pids, cmd.Process.Pid)
		c.logs = append(c.logs, logs)
	}
	return c
}

// rankEnv is a Ray worker's environment on node i as the agent and the
// shim give it: the native library preloaded with the node's rules and
// the mesh's address (meshOn false: the shim as it was before the mesh).
// GLOO_SOCKET_IFNAME stands for Docker's /etc/hosts, where the hostname
// names the container's address (this namespace shares the machine's).
func (c *cluster) rankEnv(i int, lib string, meshOn bool) []string {
	n := c.net.nodes[i]
	env := []string{"PATH=/usr/bin:/bin", "GLOO_SOCKET_IFNAME=eth0", "OMP_NUM_THREADS=1",
		"LD_PRELOAD=" + lib, fmt.Sprintf("NAT_SHIM=%s %s %s", n.public, n.private, n.ports())}
	if meshOn {
		env = append(env, "NAT_SHIM_MESH="+c.ask[i])
	}
	if c.timeoutS != "" {
		env = append(env, "RANK_TIMEOUT_S="+c.timeoutS)
	}
	return env
}

// rank is one torch rank's result line.
type rank struct {
	Rank         int            `json:"rank"`
	OK           bool           `json:"ok"`
	Exception    string         `json:"exception"`
	InitS        float64        `json:"init_s"`
	AllReduce    []float64      `json:"all_reduce"`
	Broadcast    []float64      `json:"broadcast"`
	Object       map[string]any `json:"object"`
	Group        []float64      `json:"group"`
	Error        *string        `json:"error"`
	FailedAfterS float64        `json:"failed_after_s"`
	Seconds      float64        `json:"seconds"`
	raw          string
}

// runRanks runs one rank per entry of nodes (node index each), rank 0's
// address being its node's public IP and a port outside the 64 (as Ray
// Train's kernel-picked one is), and returns their results in rank order.
func (c *cluster) runRanks(t testing.TB, lib string, meshOn bool, nodes []int, mode string, extra ...string) []rank {
	t.Helper()
	c.store++
	addr := fmt.Sprintf("%s:%d", c.net.nodes[nodes[0]].public, 29500+c.store)
	script, _ := filepath.Abs("testdata/rank.py")
	res := make([]rank, len(nodes))
	done := make(chan int, len(nodes))
	for r, ni := range nodes {
		args := append([]string{"/usr/bin/python3", script, strconv.Itoa(r), strconv.Itoa(len(nodes)), addr, mode}, extra...)
		cpu := c.cpuOf(ni)
		if c.rankCPUs != nil {
			cpu = c.rankCPUs[r]
		}
		cmd := inNS(c.net.nodes[ni].ns, cpu, args...)
		cmd.Env = c.rankEnv(ni, lib, meshOn)
		go func(r int) {
			out, err := cmd.CombinedOutput()
			s := strings.TrimSpace(string(out))
			res[r].raw = s
			if i := strings.LastIndex(s, "\n{"); i >= 0 {
				s = s[i+1:]
			}
			if json.Unmarshal([]byte(s), &res[r]) != nil {
				res[r].Exception = fmt.Sprintf("no result (%v): %s", err, res[r].raw)
			}
			done <- r
		}(r)
	}
	for range nodes {
		<-done
	}
	return res
}
