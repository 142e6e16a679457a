package rvtest

import (
	"crypto/tls"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/pki"
)

// NodePKI is a fresh cluster CA and one node cert it issued for 127.0.0.1:
// what a guest API server needs to serve HTTPS on loopback.
type NodePKI struct {
	CA   *pki.CA
	Node pki.Issued
}

// NewNodePKI makes a CA and a node cert naming instanceID at 127.0.0.1.
func NewNodePKI(t testing.TB, instanceID string) NodePKI {
	t.Helper()
	ca, _, err := pki.NewCA(nil, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	node, err := ca.IssueNode(nil, pki.NodeRequest{InstanceID: instanceID, PublicIP: netip.MustParseAddr("127.0.0.1"), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return NodePKI{CA: ca, Node: node}
}

// ClientTLS trusts the CA alone, for a client dialing 127.0.0.1.
func (p NodePKI) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: p.CA.Pool(), ServerName: "127.0.0.1"}
}

// TCPServer serves on listeners until closed, as the guest API does.
type TCPServer interface {
	ServeTCP(net.Listener) error
	Close() error
}

// ServeLoopback serves srv on a fresh 127.0.0.1 port until the test ends
// and returns the listener's address.
func ServeLoopback(t testing.TB, srv TCPServer) *net.TCPAddr {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr)
}
