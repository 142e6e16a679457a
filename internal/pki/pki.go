// Package pki is the cluster's certificate authority (docs/protocol.md §7): an ECDSA
// P-256 CA made once by `head init`, the head's serving certificate, and one
// node certificate per enrolled instance, bound to its instance ID by a URI
// SAN and to its public IP by an IP SAN.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// Lifetimes of what the CA signs.
const (
	CALifetime     = 10 * 365 * 24 * time.Hour
	ServerLifetime = 10 * 365 * 24 * time.Hour
	NodeLifetime   = 365 * 24 * time.Hour
	// backdate covers clocks a little behind the head's.
	backdate = 5 * time.Minute
)

// URIPrefix starts the one URI SAN of a node certificate.
const URIPrefix = "rayvast:instance/"

// CA signs server and node certificates. Its key stays in this value and in
// the state dir's 0600 file; nothing else ever sees it.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// Issued is one signed certificate with its fresh key.
type Issued struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  secret.Bytes // PKCS#8 PEM
	Serial  string       // lowercase hex
}

// NewCA makes a self-signed CA named after the cluster.
func NewCA(rnd io.Reader, cluster string, now time.Time) (*CA, secret.Bytes, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rnd)
	if err != nil {
		return nil, secret.Bytes{}, fmt.Errorf("generate ca key: %w", err)
	}
	serial, err := randomSerial(rnd)
	if err != nil {
		return nil, secret.Bytes{}, err
	}
	name := "rayvast CA"
	if cluster != "" {
		name = "rayvast " + cluster + " CA"
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rnd, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, secret.Bytes{}, fmt.Errorf("sign ca: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, secret.Bytes{}, fmt.Errorf("parse ca: %w", err)
	}
	keyPEM, err := MarshalKey(key)
	if err != nil {
		return nil, secret.Bytes{}, err
	}
	return &CA{Cert: cert, CertPEM: certPEM(der), key: key}, keyPEM, nil
}

// LoadCA reads a CA from its PEM certificate and PKCS#8 PEM key, and checks
// that they belong together.
func LoadCA(certPEMBytes, keyPEM []byte) (*CA, error) {
	cert, err := ParseCert(certPEMBytes)
	if err != nil {
		return nil, fmt.Errorf("load ca cert: %w", err)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load ca key: %w", err)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("load ca: key does not match certificate")
	}
	if !cert.IsCA {
		return nil, errors.New("load ca: certificate is not a CA")
	}
	return &CA{Cert: cert, CertPEM: certPEM(cert.Raw), key: key}, nil
}

// Fingerprint is the lowercase hex SHA-256 of the CA certificate's DER bytes
// (RAYVAST_CA_SHA256).
func (ca *CA) Fingerprint() string { return Fingerprint(ca.Cert.Raw) }

// Fingerprint is the lowercase hex SHA-256 of der.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// Pool is a cert pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// IssueServer signs the head's serving certificate for its IP and optional
// DNS names.
func (ca *CA) IssueServer(rnd io.Reader, ip netip.Addr, dnsNames []string, now time.Time) (Issued, error) {
	if !ip.IsValid() {
		return Issued{}, errors.New("issue server cert: no ip")
	}
	return ca.issue(rnd, &x509.Certificate{
		Subject:     pkix.Name{CommonName: ip.String()},
		IPAddresses: []net.IP{ip.AsSlice()},
		DNSNames:    dnsNames,
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(ServerLifetime),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// NodeRequest names what a node certificate binds.
type NodeRequest struct {
	InstanceID string
	PublicIP   netip.Addr
	Now        time.Time
	Lifetime   time.Duration // 0 = NodeLifetime
}

// IssueNode signs a node certificate exactly as docs/protocol.md §7: IP SANs {public IP,
// 127.0.0.1}, DNS SAN localhost, one URI SAN rayvast:instance/<id>, EKU
// server and client (Ray uses one certificate for both), random 128-bit serial.
func (ca *CA) IssueNode(rnd io.Reader, r NodeRequest) (Issued, error) {
	if !wire.ValidInstanceID(r.InstanceID) {
		return Issued{}, errors.New("issue node cert: invalid instance id")
	}
	if !r.PublicIP.IsValid() {
		return Issued{}, errors.New("issue node cert: no public ip")
	}
	life := r.Lifetime
	if life == 0 {
		life = NodeLifetime
	}
	ips := []net.IP{r.PublicIP.Unmap().AsSlice()}
	if lo := netip.MustParseAddr("127.0.0.1"); r.PublicIP.Unmap() != lo {
		ips = append(ips, lo.AsSlice())
	}
	return ca.issue(rnd, &x509.Certificate{
		Subject:     pkix.Name{CommonName: r.InstanceID},
		IPAddresses: ips,
		DNSNames:    []string{"localhost"},
		URIs:        []*url.URL{InstanceURI(r.InstanceID)},
		NotBefore:   r.Now.Add(-backdate),
		NotAfter:    r.Now.Add(life),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(rnd io.Reader, tmpl *x509.Certificate) (Issued, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rnd)
	if err != nil {
		return Issued{}, fmt.Errorf("generate key: %w", err)
	}
	if tmpl.SerialNumber, err = randomSerial(rnd); err != nil {
		return Issued{}, err
	}
	if tmpl.KeyUsage == 0 {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	der, err := x509.CreateCertificate(rnd, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Issued{}, fmt.Errorf("sign cert: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Issued{}, fmt.Errorf("parse cert: %w", err)
	}
	keyPEM, err := MarshalKey(key)
	if err != nil {
		return Issued{}, err
	}
	return Issued{Cert: cert, CertPEM: certPEM(der), KeyPEM: keyPEM, Serial: SerialHex(cert.SerialNumber)}, nil
}

// InstanceURI is the URI SAN naming an instance.
func InstanceURI(id string) *url.URL {
	return &url.URL{Scheme: "rayvast", Opaque: "instance/" + id}
}

// InstanceID returns the instance a node certificate names: it must carry
// exactly one URI SAN, rayvast:instance/<valid id>.
func InstanceID(cert *x509.Certificate) (string, error) {
	if len(cert.URIs) != 1 {
		return "", fmt.Errorf("certificate has %d URI SANs, want 1", len(cert.URIs))
	}
	s := cert.URIs[0].String()
	id, ok := strings.CutPrefix(s, URIPrefix)
	if !ok || !wire.ValidInstanceID(id) {
		return "", errors.New("certificate URI SAN is not rayvast:instance/<id>")
	}
	return id, nil
}

// SerialHex is a serial number as lowercase hex.
func SerialHex(n *big.Int) string { return hex.EncodeToString(n.Bytes()) }

// randomSerial is 128 random bits, never zero.
func randomSerial(rnd io.Reader) (*big.Int, error) {
	b := make([]byte, 16)
	for {
		if _, err := io.ReadFull(rnd, b); err != nil {
			return nil, fmt.Errorf("random serial: %w", err)
		}
		if n := new(big.Int).SetBytes(b); n.Sign() > 0 {
			return n, nil
		}
	}
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// MarshalKey encodes an ECDSA key as PKCS#8 PEM.
func MarshalKey(key *ecdsa.PrivateKey) (secret.Bytes, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return secret.Bytes{}, fmt.Errorf("marshal key: %w", err)
	}
	return secret.NewBytes(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
}

// ParseKey decodes a PKCS#8 PEM ECDSA key.
func ParseKey(keyPEM []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, errors.New("parse key: no PRIVATE KEY PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("parse key: not an ECDSA key")
	}
	return ec, nil
}

// ParseCert decodes exactly one PEM certificate.
func ParseCert(pemBytes []byte) (*x509.Certificate, error) {
	b, rest := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("parse cert: no CERTIFICATE PEM block")
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, errors.New("parse cert: more than one PEM block")
	}
	return x509.ParseCertificate(b.Bytes)
}

// IssueRayHead signs the certificate of the Ray head process, so it joins
// the nodes' TLS setup: IP SANs {ip, 127.0.0.1}, DNS SAN localhost, EKU
// server and client like a node's, but no instance URI, so port B can never
// take it for a node.
func (ca *CA) IssueRayHead(rnd io.Reader, ip netip.Addr, now time.Time) (Issued, error) {
	if !ip.IsValid() {
		return Issued{}, errors.New("issue ray head cert: no ip")
	}
	ips := []net.IP{ip.Unmap().AsSlice()}
	if lo := netip.MustParseAddr("127.0.0.1"); ip.Unmap() != lo {
		ips = append(ips, lo.AsSlice())
	}
	return ca.issue(rnd, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "ray-head"},
		IPAddresses: ips,
		DNSNames:    []string{"localhost"},
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(NodeLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}
