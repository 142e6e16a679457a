package nodeapi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"runtime"
	"sync"
	"time"
	"weak"
)

// Port B verifies a client's chain once per connection, in the handshake
// (VerifyConnection), and keeps the verdict beside the connection's leaf
// certificate, which every request on that connection shares. The handshake
// never fails for a bad certificate: the request gets the same 403 as every
// other refusal, so a stranger learns nothing.

type verdict struct {
	err       error
	notBefore time.Time // of the whole chain: checked per request, cheaply
	notAfter  time.Time
}

type verdicts struct {
	mu    sync.Mutex
	m     map[weak.Pointer[x509.Certificate]]verdict
	count int // chains verified, for tests
}

// TLSConfig is port B's TLS: the head's serving certificate, and a client
// certificate requested on every connection and verified once (with the
// head's clock) in the handshake.
func (s *Server) TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates:     []tls.Certificate{cert},
		ClientAuth:       tls.RequestClientCert,
		MinVersion:       tls.VersionTLS12,
		VerifyConnection: s.verifyConnection,
	}
}

func (s *Server) verifyConnection(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) > 0 {
		s.remember(cs.PeerCertificates)
	}
	return nil
}

// remember verifies the chain and keeps the verdict until the leaf is
// garbage (the connection is gone).
func (s *Server) remember(chain []*x509.Certificate) verdict {
	leaf := chain[0]
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	v := verdict{notBefore: leaf.NotBefore, notAfter: leaf.NotAfter}
	chains, err := leaf.Verify(x509.VerifyOptions{Roots: s.cfg.CA, Intermediates: inter, CurrentTime: s.cfg.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	v.err = err
	if err == nil {
		for _, c := range chains[0] {
			v.notBefore, v.notAfter = later(v.notBefore, c.NotBefore), earlier(v.notAfter, c.NotAfter)
		}
	}
	k := weak.Make(leaf)
	s.v.mu.Lock()
	s.v.m[k] = v
	s.v.count++
	s.v.mu.Unlock()
	runtime.AddCleanup(leaf, s.forget, k)
	return v
}

func (s *Server) forget(k weak.Pointer[x509.Certificate]) {
	s.v.mu.Lock()
	delete(s.v.m, k)
	s.v.mu.Unlock()
}

var errOutsideValidity = errors.New("certificate chain outside its validity period")

// verifyChain is the per-request part: the handshake's verdict and the
// validity period against the head's clock now.
func (s *Server) verifyChain(chain []*x509.Certificate) error {
	s.v.mu.Lock()
	v, ok := s.v.m[weak.Make(chain[0])]
	s.v.mu.Unlock()
	if !ok { // not seen in a handshake (cannot happen with TLSConfig): verify now
		v = s.remember(chain)
	}
	if v.err != nil {
		return v.err
	}
	if now := s.cfg.Now(); now.Before(v.notBefore) || now.After(v.notAfter) {
		return errOutsideValidity
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
