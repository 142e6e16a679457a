package mesh

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// ALPN names the mesh's stream protocol in the TLS handshake.
const ALPN = "rayvast-mesh/1"

// Config is one node's mesh.
type Config struct {
	Self string          // this node's instance ID
	Cert tls.Certificate // the node certificate and key
	CA   *x509.Certificate
	// Local is the container's own address: streams from other nodes are
	// delivered to it (where a listener bound to the node IP really is,
	// through the shim), never to loopback, so what listens on loopback
	// only stays this node's own.
	Local netip.Addr
	// MeshPort is this node's mesh port (never a delivery target).
	MeshPort int
	// DialTimeout bounds reaching another agent and its local connect
	// (default 10 s).
	DialTimeout time.Duration
	// Refresh, optional, asks the head for the membership now and returns
	// once its answer is in (a heartbeat out of turn). The mesh calls it
	// the first time a connect names an address no member has, per
	// membership version: a node that joined since the last heartbeat is
	// then reached on the first try, and any other address costs one
	// heartbeat's round trip once.
	Refresh func(ctx context.Context)
	Log     *slog.Logger
}

// refreshWait bounds how long a connect waits for Refresh.
const refreshWait = 3 * time.Second

// Mesh is a node's agent-to-agent carrier.
type Mesh struct {
	cfg     Config
	pool    *x509.CertPool
	members atomic.Pointer[view]

	mu      sync.Mutex
	streams map[string]map[*stream]struct{} // open streams by peer ID
	asked   map[netip.Addr]string           // unknown addresses refreshed for, by version
}

// New returns a mesh with no members yet (every question answers "direct"
// until the first Update).
func New(cfg Config) *Mesh {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	pool := x509.NewCertPool()
	if cfg.CA != nil {
		pool.AddCert(cfg.CA)
	}
	m := &Mesh{cfg: cfg, pool: pool, streams: map[string]map[*stream]struct{}{}, asked: map[netip.Addr]string{}}
	m.members.Store(newView(wire.MeshMembers{}))
	return m
}

// Version is the membership version this node holds ("" none yet).
func (m *Mesh) Version() string { return m.members.Load().version }

// Update installs a membership from the head and cuts every open stream
// with a node no longer in it: an ended node keeps nothing open.
func (m *Mesh) Update(mm wire.MeshMembers) {
	v := newView(mm)
	old := m.members.Swap(v)
	if old.version != v.version {
		m.cfg.Log.Info("mesh membership", "version", v.version, "members", len(v.byID))
	}
	m.mu.Lock()
	var cut []*stream
	for id, set := range m.streams {
		if _, ok := v.byID[id]; ok {
			continue
		}
		for s := range set {
			cut = append(cut, s)
		}
	}
	m.mu.Unlock()
	for _, s := range cut {
		m.cfg.Log.Info("mesh: cutting a stream of a node no longer a member", "peer", s.peer)
		s.close()
	}
}

// route is the member a connect to ip:port goes through, asking the head
// for the membership once per version when ip is no member's.
func (m *Mesh) route(ip netip.Addr, port int) (member, bool) {
	v := m.members.Load()
	if mb, ok := v.route(m.cfg.Self, ip, port); ok || m.cfg.Refresh == nil {
		return mb, ok
	}
	if _, known := v.byIP[ip.Unmap()]; known {
		return member{}, false // a member's forwarded port, or this node
	}
	m.mu.Lock()
	seen := m.asked[ip] == v.version
	if !seen {
		if len(m.asked) > 4096 {
			clear(m.asked)
		}
		m.asked[ip] = v.version
	}
	m.mu.Unlock()
	if seen {
		return member{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), refreshWait)
	m.cfg.Refresh(ctx)
	cancel()
	return m.members.Load().route(m.cfg.Self, ip, port)
}

// isMember reports whether a certificate names a live member other than
// this node.
func (m *Mesh) isMember(cert *x509.Certificate) (string, error) {
	id, err := pki.InstanceID(cert)
	if err != nil {
		return "", err
	}
	if id == m.cfg.Self {
		return "", errors.New("mesh: a stream from this node itself")
	}
	if _, ok := m.members.Load().byID[id]; !ok {
		return "", fmt.Errorf("mesh: %s is not a live member of the cluster", id)
	}
	return id, nil
}

// serverTLS accepts only a client certificate from the cluster CA that
// names a live member.
func (m *Mesh) serverTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{m.cfg.Cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    m.pool,
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{ALPN},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("mesh: no client certificate")
			}
			_, err := m.isMember(cs.PeerCertificates[0])
			return err
		},
	}
}

// clientTLS accepts only the certificate of the member dialled.
func (m *Mesh) clientTLS(mb member) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{m.cfg.Cert},
		RootCAs:      m.pool,
		ServerName:   mb.ip.String(), // node certs carry the public IP as an IP SAN
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{ALPN},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("mesh: no server certificate")
			}
			id, err := pki.InstanceID(cs.PeerCertificates[0])
			if err != nil {
				return err
			}
			if id != mb.id {
				return fmt.Errorf("mesh: %s answered for %s", id, mb.id)
			}
			return nil
		},
	}
}

// track records an open stream with peer until it closes.
func (m *Mesh) track(peer string, s *stream) func() {
	m.mu.Lock()
	set := m.streams[peer]
	if set == nil {
		set = map[*stream]struct{}{}
		m.streams[peer] = set
	}
	set[s] = struct{}{}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(set, s)
		if len(set) == 0 && m.streams[peer] != nil && len(m.streams[peer]) == 0 {
			delete(m.streams, peer)
		}
		m.mu.Unlock()
	}
}

// Streams is how many streams are open (tests, metrics).
func (m *Mesh) Streams() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, set := range m.streams {
		n += len(set)
	}
	return n
}

// isTemporary reports an Accept error worth retrying.
func isTemporary(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
