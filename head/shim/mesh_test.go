package shim

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/mesh"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// meshNode is a real agent mesh (agent/mesh) at ip, whose container
// address is ip too; ask is its loopback question address.
func meshNode(t *testing.T, ca *pki.CA, id, ip string) (m *mesh.Mesh, port int, ask string) {
	t.Helper()
	is, err := ca.IssueNode(nil, pki.NodeRequest{InstanceID: id, PublicIP: netip.MustParseAddr(ip), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := tls.X509KeyPair(is.CertPEM, is.KeyPEM.Reveal())
	peers, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	local, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peers.Close(); local.Close() })
	port = peers.Addr().(*net.TCPAddr).Port
	m = mesh.New(mesh.Config{Self: id, Cert: kp, CA: ca.Cert, Local: netip.MustParseAddr(ip), MeshPort: port, DialTimeout: 2 * time.Second})
	go m.ServePeers(peers)
	go m.ServeLocal(local)
	return m, port, local.Addr().String()
}

// TestNativeMesh runs the C probe under the library with NAT_SHIM_MESH
// pointing at a real agent mesh (node "a", node IP 203.0.113.7 on no
// interface, container IP 127.0.0.1), with member "b" at 198.18.31.2. It
// proves the library's three mesh rules: a TCP connect to b on a port
// outside b's 64 comes back connected to a's agent (the stream the mesh
// carries: its peer is the agent's loopback address), and fails with the
// far side's errno where nothing listens; a connect to b's forwarded port,
// and any UDP connect, go direct; a connect to the node IP on a port that
// is not the node's own reaches the container IP; and getsockname of a
// listener bound to the node IP answers the node IP. Without
// NAT_SHIM_MESH the first goes direct (the control).
func TestNativeMesh(t *testing.T) {
	if os.Getenv(meshNetnsEnv) == "" {
		needRoot(t, "ip")
		// b's address must be no loopback one (the library never asks
		// about those): the test runs again inside a namespace of its own,
		// with b's IP on its lo, agents and probe together.
		rerunInNetns(t, "TestNativeMesh", meshNetnsEnv, "198.18.31.2")
		return
	}
	lib, probe := os.Getenv("RVSHIM_TEST_LIB"), os.Getenv("RVSHIM_TEST_PROBE")
	ca, _, _ := pki.NewCA(nil, "c", time.Now())
	ma, portA, ask := meshNode(t, ca, "a", "127.0.0.1")
	mb, portB, _ := meshNode(t, ca, "b", "198.18.31.2")
	l, err := net.Listen("tcp", "198.18.31.2:0")
	if err != nil {
		t.Fatal(err)
	}
	mm := wire.MeshMembers{Version: "1", Peers: []wire.MeshMember{
		{InstanceID: "a", PublicIP: "127.0.0.1", MeshPort: portA},
		{InstanceID: "b", PublicIP: "198.18.31.2", MeshPort: portB, Ports: []int{portB}},
	}}
	ma.Update(mm)
	mb.Update(mm)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	rank := l.Addr().(*net.TCPAddr).Port
	free, other := freePort(t, "198.18.31.2"), freePort(t, "127.0.0.1")
	rules := fmt.Sprintf("203.0.113.7 127.0.0.1 %d", other+1)
	p := func(n int) string { return fmt.Sprint(n) }
	tests := []struct {
		name, mesh string
		ops        []string
		want       []string
	}{
		{"control: without the mesh a connect to b goes direct", "",
			[]string{"tcp4", "connect", "198.18.31.2", p(rank)}, []string{"ok *:* 198.18.31.2:" + p(rank)}},
		{"a connect to b outside its 64 is carried by the mesh", ask,
			[]string{"tcp4", "connect", "198.18.31.2", p(rank)}, []string{"ok 127.0.0.1:* " + ask}},
		{"nothing listening at b: the far side's ECONNREFUSED", ask,
			[]string{"tcp4", "connect", "198.18.31.2", p(free)}, []string{"err ECONNREFUSED"}},
		{"b's forwarded port goes direct", ask,
			[]string{"tcp4", "connect", "198.18.31.2", p(portB)}, []string{"ok *:* 198.18.31.2:" + p(portB)}},
		{"UDP goes direct", ask,
			[]string{"udp4", "connect", "198.18.31.2", p(rank)}, []string{"ok *:* 198.18.31.2:" + p(rank)}},
		{"the node IP on any port reaches the container IP; a listener there shows the node IP", ask,
			[]string{"tcp4", "listen", "203.0.113.7", p(other), "tcp4", "connect", "203.0.113.7", p(other)},
			[]string{"ok 203.0.113.7:" + p(other) + " -:0", "ok 127.0.0.1:* 127.0.0.1:" + p(other)}},
		// NCCL's socket transport connects non-blocking: connect answers 0
		// or EINPROGRESS, then poll and SO_ERROR. Through the mesh it must
		// read as a plain socket's connect: done with SO_ERROR 0 and the
		// socket still non-blocking, or refused with ECONNREFUSED.
		{"control: a plain non-blocking connect to b", "",
			[]string{"tcp4", "nbconnect", "198.18.31.2", p(rank)}, []string{"ok *:* 198.18.31.2:" + p(rank) + " nonblock"}},
		{"a non-blocking connect to b through the mesh", ask,
			[]string{"tcp4", "nbconnect", "198.18.31.2", p(rank)}, []string{"ok 127.0.0.1:* " + ask + " nonblock"}},
		{"control: a plain non-blocking connect where nothing listens", "",
			[]string{"tcp4", "nbconnect", "198.18.31.2", p(free)}, []string{"err ECONNREFUSED"}},
		{"a non-blocking connect through the mesh where nothing listens", ask,
			[]string{"tcp4", "nbconnect", "198.18.31.2", p(free)}, []string{"err ECONNREFUSED"}},
		{"a non-blocking v4-mapped connect through the mesh", ask,
			[]string{"tcp6", "nbconnect", "::ffff:198.18.31.2", p(rank)}, []string{"ok ::ffff:127.0.0.1:* ::ffff:" + ask + " nonblock"}},
		{"v4-mapped listener shows the node IP", ask,
			[]string{"tcp6", "listen", "::ffff:203.0.113.7", p(other)}, []string{"ok ::ffff:203.0.113.7:" + p(other) + " -:0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{"LD_PRELOAD=" + lib, "NAT_SHIM=" + rules}
			if tt.mesh != "" {
				env = append(env, "NAT_SHIM_MESH="+tt.mesh)
			}
			runProbe(t, probe, env, tt.ops, tt.want)
		})
	}
}

// meshNetnsEnv marks the run of TestNativeMesh inside its namespace.
const meshNetnsEnv = "RVSHIM_MESH_NETNS"

// rerunInNetns runs test again inside a namespace of its own (lo up,
// addrs on it as /32s), with mark set in its env and the native library and
// the probe built here passed as RVSHIM_TEST_LIB and RVSHIM_TEST_PROBE,
// and fails t if the inner run fails.
func rerunInNetns(t *testing.T, test, mark string, addrs ...string) {
	t.Helper()
	lib, probe := buildNative(t, "native"), buildProbe(t)
	ns := fmt.Sprintf("rvshim-%s-%d", strings.ToLower(strings.TrimPrefix(test, "TestNative")), os.Getpid())
	cmds := [][]string{{"netns", "add", ns}, {"-n", ns, "link", "set", "lo", "up"}}
	for _, a := range addrs {
		cmds = append(cmds, []string{"-n", ns, "addr", "add", a + "/32", "dev", "lo"})
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(c, " "), err, out)
		}
		if c[0] == "netns" {
			t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		}
	}
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), mark+"=1", "RVSHIM_TEST_LIB="+lib, "RVSHIM_TEST_PROBE="+probe)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("inside the namespace: %v\n%s", err, out)
	}
	t.Logf("inside the namespace:\n%s", out)
}

func freePort(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
