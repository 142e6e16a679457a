package mesh

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// node is one agent's mesh in a test: its public IP doubles as its
// container's address (loopback addresses of its own).
type node struct {
	id   string
	ip   netip.Addr
	m    *Mesh
	port int    // mesh port
	ask  string // the local listener's address
}

func newNode(t *testing.T, ca *pki.CA, id, ip string) *node {
	t.Helper()
	addr := netip.MustParseAddr(ip)
	is, err := ca.IssueNode(nil, pki.NodeRequest{InstanceID: id, PublicIP: addr, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	peers, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	local, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{id: id, ip: addr, port: peers.Addr().(*net.TCPAddr).Port, ask: local.Addr().String()}
	n.m = New(Config{Self: id, Cert: kp, CA: ca.Cert, Local: addr, MeshPort: n.port, DialTimeout: 2 * time.Second})
	go n.m.ServePeers(peers)
	go n.m.ServeLocal(local)
	t.Cleanup(func() { peers.Close(); local.Close() })
	return n
}

func (n *node) member(ports ...int) wire.MeshMember {
	return wire.MeshMember{InstanceID: n.id, PublicIP: n.ip.String(), MeshPort: n.port, Ports: ports}
}

func members(v string, ms ...wire.MeshMember) wire.MeshMembers {
	return wire.MeshMembers{Version: v, Peers: ms}
}

// ask is the shim's question; it returns the answer line and the socket.
// twoNodes starts members a (ipA, mesh port 20000) and b (ipB, 20001) of
// one cluster, each knowing both.
func twoNodes(t *testing.T, ca *pki.CA, ipA, ipB string) (a, b *node) {
	t.Helper()
	a, b = newNode(t, ca, "a", ipA), newNode(t, ca, "b", ipB)
	mm := members("v1", a.member(20000), b.member(20001))
	a.m.Update(mm)
	b.m.Update(mm)
	return a, b
}

func ask(t *testing.T, from *node, ip string, port int) (string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", from.ask)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "RVMESH1 "+ip+" "+strconv.Itoa(port)+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := readLine(c)
	if err != nil {
		c.Close()
		return "error: " + err.Error(), nil
	}
	return line, c
}

// readLine reads one line byte by byte, as the shim does (nothing past it).
func readLine(c net.Conn) (string, error) {
	var b strings.Builder
	one := make([]byte, 1)
	for {
		if _, err := c.Read(one); err != nil {
			return b.String(), err
		}
		b.WriteByte(one[0])
		if one[0] == '\n' {
			return b.String(), nil
		}
	}
}

// echo listens on ip and echoes each line back upper-cased, then, at EOF,
// writes "bye" and closes: a stand-in for a rank's listener.
func echo(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					io.WriteString(c, strings.ToUpper(sc.Text())+"\n")
				}
				io.WriteString(c, "bye\n")
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// TestMeshCarriesAStream proves the path a rank's connect takes: a question
// to its agent for another member's IP on a port outside its 64 is
// answered "C", and the socket then reaches the listener on that member's
// container address, both ways; the local side's end of writing arrives
// there as EOF and the listener's last words and close come back.
func TestMeshCarriesAStream(t *testing.T) {
	ca, _, _ := pki.NewCA(nil, "c", time.Now())
	a, _ := twoNodes(t, ca, "127.0.20.1", "127.0.20.2")
	port := echo(t, "127.0.20.2")

	line, c := ask(t, a, "127.0.20.2", port)
	if line != "C\n" {
		t.Fatalf("answer %q, want C", line)
	}
	defer c.Close()
	io.WriteString(c, "hello mesh\n")
	if got, _ := readLine(c); got != "HELLO MESH\n" {
		t.Errorf("echo through the mesh: %q", got)
	}
	c.(*net.TCPConn).CloseWrite()
	if got, _ := readLine(c); got != "bye\n" {
		t.Errorf("after our half-close: %q, want the listener's last words", got)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the listener closed: %v, want EOF", err)
	}
}

// TestMeshAnswers proves the questions answered without a stream: an
// address that is no member's, a member's forwarded port (Ray's own
// traffic) and this node's own IP go direct; a port nobody listens on at
// the member fails as the connect there would (ECONNREFUSED), so a
// TCPStore client keeps retrying as it does on a LAN.
func TestMeshAnswers(t *testing.T) {
	ca, _, _ := pki.NewCA(nil, "c", time.Now())
	a := newNode(t, ca, "a", "127.0.21.1")
	b := newNode(t, ca, "b", "127.0.21.2")
	mm := members("v1", a.member(20000), b.member(20001, 20002))
	a.m.Update(mm)
	b.m.Update(mm)
	closed := echo(t, "127.0.21.2")
	for _, c := range []struct {
		name, ip string
		port     int
		want     string
	}{
		{"not a member", "127.0.21.9", 1234, "D\n"},
		{"a member's forwarded port", "127.0.21.2", 20002, "D\n"},
		{"this node's own IP", "127.0.21.1", 1234, "D\n"},
		{"nothing listens there", "127.0.21.2", 1, "E 111\n"},
		{"a listener", "127.0.21.2", closed, "C\n"},
	} {
		line, conn := ask(t, a, c.ip, c.port)
		if conn != nil {
			conn.Close()
		}
		if line != c.want {
			t.Errorf("%s: %q, want %q", c.name, line, c.want)
		}
	}
}

// TestMeshRefusesOutsiders proves who the mesh port lets in: a stranger
// without a certificate, a node of another cluster (another CA) and an
// ended node of this cluster (a valid certificate, no longer a member) get
// no stream; and an open stream of a node that stops being a member is
// cut.
func TestMeshRefusesOutsiders(t *testing.T) {
	ca, _, _ := pki.NewCA(nil, "c", time.Now())
	a, b := twoNodes(t, ca, "127.0.22.1", "127.0.22.2")
	port := echo(t, "127.0.22.2")

	// A stranger's plain TCP gets nothing back but a closed connection.
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.22.2", strconv.Itoa(b.port)))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, strconv.Itoa(port)+"\n")
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if n, _ := c.Read(make([]byte, 64)); n > 0 && !looksLikeTLSAlert(n) {
		t.Errorf("a plaintext stranger got %d bytes", n)
	}
	c.Close()

	other, _, _ := pki.NewCA(nil, "other", time.Now())
	foreign := newNode(t, other, "a", "127.0.22.3") // names a member, wrong CA
	foreign.m.Update(members("x", foreign.member(), wire.MeshMember{InstanceID: "b", PublicIP: "127.0.22.2", MeshPort: b.port}))
	if line, _ := ask(t, foreign, "127.0.22.2", port); line != "E 111\n" {
		t.Errorf("another cluster's node: %q, want E 111 (refused)", line)
	}
	ended := newNode(t, ca, "z", "127.0.22.4")
	ended.m.Update(members("x", ended.member(), b.member(20001)))
	if line, _ := ask(t, ended, "127.0.22.2", port); line != "E 111\n" {
		t.Errorf("a node that is no member: %q, want E 111 (refused)", line)
	}

	line, s := ask(t, a, "127.0.22.2", port)
	if line != "C\n" {
		t.Fatalf("a member: %q", line)
	}
	defer s.Close()
	b.m.Update(members("v2", b.member(20001))) // a ended
	s.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Read(make([]byte, 1)); err == nil {
		t.Error("a stream of a node that left the membership stayed open")
	}
}

// looksLikeTLSAlert: what a TLS server may send a client that spoke
// plaintext (a short alert record), which carries no data.
func looksLikeTLSAlert(n int) bool { return n <= 7 }

// TestMeshRefreshesForAnUnknownAddress proves a node that joined since the
// last heartbeat is reached on the first try: a connect to an address no
// member has asks for the membership out of turn (Refresh), and is carried
// once the answer names its node; an address still unknown after that is
// not asked about again under the same membership (the head's IP, the
// internet: one round trip once, not one per connect).
func TestMeshRefreshesForAnUnknownAddress(t *testing.T) {
	ca, _, _ := pki.NewCA(nil, "c", time.Now())
	a := newNode(t, ca, "a", "127.0.23.1")
	b := newNode(t, ca, "b", "127.0.23.2")
	both := members("v2", a.member(20000), b.member(20001))
	b.m.Update(both)
	a.m.Update(members("v1", a.member(20000)))
	refreshes := 0
	a.m.cfg.Refresh = func(context.Context) { refreshes++; a.m.Update(both) }
	port := echo(t, "127.0.23.2")

	if line, c := ask(t, a, "127.0.23.2", port); line != "C\n" {
		t.Errorf("a node that joined since the last beat: %q, want C", line)
	} else {
		c.Close()
	}
	for range 3 {
		if line, _ := ask(t, a, "127.0.23.9", 443); line != "D\n" {
			t.Errorf("an address of no member: %q, want D", line)
		}
	}
	if refreshes != 2 {
		t.Errorf("%d refreshes, want 2 (the new node's address once, the unknown one once)", refreshes)
	}
}
