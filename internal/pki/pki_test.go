package pki

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func newCA(t *testing.T) *CA {
	t.Helper()
	ca, keyPEM, err := NewCA(nil, "test", t0)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadCA(ca.CertPEM, keyPEM.Reveal())
	if err != nil {
		t.Fatalf("LoadCA of a fresh CA: %v", err)
	}
	return again
}

// TestNodeCertShape proves a node certificate carries exactly the SANs, EKUs
// and serial size docs/protocol.md §7 names, and verifies against the CA for both uses.
func TestNodeCertShape(t *testing.T) {
	ca := newCA(t)
	is, err := ca.IssueNode(nil, NodeRequest{InstanceID: "i-42", PublicIP: netip.MustParseAddr("203.0.113.7"), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	c := is.Cert
	var ips []string
	for _, ip := range c.IPAddresses {
		ips = append(ips, ip.String())
	}
	if got, want := strings.Join(ips, ","), "203.0.113.7,127.0.0.1"; got != want {
		t.Errorf("IP SANs = %s, want %s", got, want)
	}
	if got := strings.Join(c.DNSNames, ","); got != "localhost" {
		t.Errorf("DNS SANs = %s, want localhost", got)
	}
	if id, err := InstanceID(c); err != nil || id != "i-42" {
		t.Errorf("InstanceID = %q, %v; want i-42", id, err)
	}
	if got := c.URIs[0].String(); got != "rayvast:instance/i-42" {
		t.Errorf("URI SAN = %s", got)
	}
	if c.SerialNumber.BitLen() > 128 || c.SerialNumber.BitLen() < 64 {
		t.Errorf("serial has %d bits, want a random 128-bit value", c.SerialNumber.BitLen())
	}
	if is.Serial != hex.EncodeToString(c.SerialNumber.Bytes()) {
		t.Errorf("Serial = %s", is.Serial)
	}
	for _, eku := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{eku}}); err != nil {
			t.Errorf("verify for %v: %v", eku, err)
		}
	}
	if !strings.Contains(string(is.KeyPEM.Reveal()), "BEGIN PRIVATE KEY") {
		t.Error("node key is not PKCS#8 PEM")
	}
	if _, err := ParseKey(is.KeyPEM.Reveal()); err != nil {
		t.Error(err)
	}
	other, _ := ca.IssueNode(nil, NodeRequest{InstanceID: "i-42", PublicIP: netip.MustParseAddr("203.0.113.7"), Now: t0})
	if other.Serial == is.Serial {
		t.Error("two certificates got the same serial")
	}
}

func TestLoopbackPublicIPNotDuplicated(t *testing.T) {
	ca := newCA(t)
	is, err := ca.IssueNode(nil, NodeRequest{InstanceID: "a", PublicIP: netip.MustParseAddr("127.0.0.1"), Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if len(is.Cert.IPAddresses) != 1 {
		t.Errorf("IP SANs = %v, want just 127.0.0.1", is.Cert.IPAddresses)
	}
}

func TestFingerprintIsSHA256OfDER(t *testing.T) {
	ca := newCA(t)
	sum := sha256.Sum256(ca.Cert.Raw)
	if got, want := ca.Fingerprint(), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
}

func TestServerCert(t *testing.T) {
	ca := newCA(t)
	is, err := ca.IssueServer(nil, netip.MustParseAddr("198.51.100.1"), []string{"head.example"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"198.51.100.1", "head.example"} {
		if _, err := is.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: t0, DNSName: name}); err != nil {
			t.Errorf("verify as %s: %v", name, err)
		}
	}
}

func TestInstanceIDRejects(t *testing.T) {
	ca := newCA(t)
	is, _ := ca.IssueServer(nil, netip.MustParseAddr("198.51.100.1"), nil, t0)
	if _, err := InstanceID(is.Cert); err == nil {
		t.Error("a cert without URI SAN named an instance")
	}
	if _, err := ca.IssueNode(nil, NodeRequest{InstanceID: "a/b", PublicIP: netip.MustParseAddr("1.2.3.4"), Now: t0}); err == nil {
		t.Error("issued a cert for an invalid instance id")
	}
}

func TestLoadCAMismatch(t *testing.T) {
	a, _, _ := NewCA(nil, "a", t0)
	_, bKey, _ := NewCA(nil, "b", t0)
	if _, err := LoadCA(a.CertPEM, bKey.Reveal()); err == nil {
		t.Error("LoadCA accepted a key of another CA")
	}
}
