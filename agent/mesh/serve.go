package mesh

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// headerTimeout bounds each one-line question and answer.
const headerTimeout = 10 * time.Second

// ServePeers accepts other agents' streams on l (the mesh port, every
// address: vast forwards it) until l closes.
func (m *Mesh) ServePeers(l net.Listener) error {
	cfg := m.serverTLS()
	for {
		c, err := l.Accept()
		if err != nil {
			if isTemporary(err) {
				continue
			}
			return err
		}
		bc := newBatchConn(c)
		go m.fromPeer(tls.Server(bc, cfg), bc)
	}
}

// fromPeer is one stream from another agent: handshake, the port, the
// local connect, the answer, then bytes.
func (m *Mesh) fromPeer(tc *tls.Conn, bc *batchConn) {
	_ = tc.SetDeadline(time.Now().Add(headerTimeout))
	if err := tc.Handshake(); err != nil {
		m.cfg.Log.Warn("mesh: refused a stream", "from", tc.RemoteAddr().String(), "err", err)
		tc.Close()
		return
	}
	peer, _ := m.isMember(tc.ConnectionState().PeerCertificates[0])
	br := bufio.NewReaderSize(tc, 64)
	line, err := br.ReadString('\n')
	if err != nil || br.Buffered() != 0 {
		tc.Close() // the dialer waits for the answer before it sends bytes
		return
	}
	port, err := strconv.Atoi(strings.TrimSuffix(line, "\n"))
	if err != nil || port <= 0 || port > 65535 {
		tc.Close()
		return
	}
	if port == m.cfg.MeshPort {
		fmt.Fprintf(tc, "E %d\n", int(syscall.ECONNREFUSED))
		tc.Close()
		return
	}
	d := net.Dialer{Timeout: m.cfg.DialTimeout}
	local, err := d.Dial("tcp", netip.AddrPortFrom(m.cfg.Local, uint16(port)).String())
	if err != nil {
		m.answer(tc, errnoOf(err), peer, nil, nil)
		return
	}
	m.answer(tc, 0, peer, local, bc)
}

// answer tells the asking side (asker) how its connect went: errno != 0
// fails it; else "C", and the stream runs between asker and other.
func (m *Mesh) answer(asker net.Conn, errno int, peer string, other net.Conn, bc *batchConn) {
	if errno != 0 {
		fmt.Fprintf(asker, "E %d\n", errno)
		asker.Close()
		return
	}
	if _, err := asker.Write([]byte("C\n")); err != nil {
		other.Close()
		asker.Close()
		return
	}
	_ = asker.SetDeadline(time.Time{})
	if _, fromPeer := asker.(*tls.Conn); fromPeer {
		m.splice(peer, other, asker, bc) // asker is the far agent: other is local
	} else {
		m.splice(peer, asker, other, bc)
	}
}

// splice runs a stream, tracked under its peer so that a membership
// without the peer cuts it.
func (m *Mesh) splice(peer string, local, far net.Conn, bc *batchConn) {
	if tc, ok := local.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	s := &stream{peer: peer, a: local, b: far, batch: bc}
	if sc, ok := local.(syscall.Conn); ok {
		s.araw, _ = sc.SyscallConn()
	}
	done := m.track(peer, s)
	defer done()
	if _, ok := m.members.Load().byID[peer]; !ok { // cut between the check and track
		s.close()
		return
	}
	s.run()
}

// ServeLocal answers the shim's questions on l (loopback) until l closes.
func (m *Mesh) ServeLocal(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if isTemporary(err) {
				continue
			}
			return err
		}
		go m.fromLocal(c)
	}
}

// fromLocal is one question of a local process: direct, or a stream to
// the member that owns the address.
func (m *Mesh) fromLocal(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(headerTimeout))
	br := bufio.NewReaderSize(c, 64)
	line, err := br.ReadString('\n')
	if err != nil || br.Buffered() != 0 {
		c.Close()
		return
	}
	ip, port, ok := parseQuestion(line)
	if !ok {
		c.Close()
		return
	}
	mb, ok := m.route(ip, port)
	if !ok {
		c.Write([]byte("D\n"))
		c.Close()
		return
	}
	far, bc, errno := m.dial(mb, port)
	if errno != 0 {
		m.answer(c, errno, mb.id, nil, nil)
		return
	}
	m.answer(c, 0, mb.id, far, bc)
}

// parseQuestion reads "RVMESH1 <ipv4> <port>\n".
func parseQuestion(line string) (netip.Addr, int, bool) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "RVMESH1" || !strings.HasSuffix(line, "\n") {
		return netip.Addr{}, 0, false
	}
	ip, err := netip.ParseAddr(f[1])
	port, perr := strconv.Atoi(f[2])
	if err != nil || !ip.Is4() || perr != nil || port <= 0 || port > 65535 {
		return netip.Addr{}, 0, false
	}
	return ip, port, true
}

// dial opens a stream to port on member mb: TLS to its agent, the port,
// its answer. The errno is what the local connect should fail with.
func (m *Mesh) dial(mb member, port int) (*tls.Conn, *batchConn, int) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.DialTimeout+headerTimeout)
	defer cancel()
	nd := net.Dialer{Timeout: m.cfg.DialTimeout}
	raw, err := nd.DialContext(ctx, "tcp", mb.mesh.String())
	if err != nil {
		m.cfg.Log.Warn("mesh: cannot reach a member", "peer", mb.id, "addr", mb.mesh.String(), "err", err)
		return nil, nil, errnoOf(err)
	}
	bc := newBatchConn(raw)
	tc := tls.Client(bc, m.clientTLS(mb))
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		m.cfg.Log.Warn("mesh: a member refused the handshake", "peer", mb.id, "addr", mb.mesh.String(), "err", err)
		return nil, nil, errnoOf(err)
	}
	_ = tc.SetDeadline(time.Now().Add(headerTimeout + m.cfg.DialTimeout))
	if _, err := fmt.Fprintf(tc, "%d\n", port); err != nil {
		tc.Close()
		return nil, nil, errnoOf(err)
	}
	br := bufio.NewReaderSize(tc, 64)
	line, err := br.ReadString('\n')
	if err != nil || br.Buffered() != 0 {
		tc.Close()
		if err == nil {
			err = errors.New("bytes after the answer")
		}
		m.cfg.Log.Warn("mesh: no answer from a member", "peer", mb.id, "err", err)
		return nil, nil, int(syscall.ECONNREFUSED)
	}
	if line != "C\n" {
		tc.Close()
		if n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "E "))); err == nil && n > 0 && n < 4096 {
			return nil, nil, n
		}
		return nil, nil, int(syscall.ECONNREFUSED)
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, bc, 0
}

// errnoOf is the errno a connect failure should carry for the process:
// the system's own where there is one, ETIMEDOUT for a timeout, else
// ECONNREFUSED (a refused handshake: this node is not let in).
func errnoOf(err error) int {
	var en syscall.Errno
	if errors.As(err, &en) && en != 0 {
		return int(en)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return int(syscall.ETIMEDOUT)
	}
	return int(syscall.ECONNREFUSED)
}
