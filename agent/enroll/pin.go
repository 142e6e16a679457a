// Package enroll is the agent's side of port A: pin the cluster CA
// (docs/protocol.md §5 step 2) and POST /enroll with retries (§6).
package enroll

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
)

// maxCAPEM bounds the /ca.pem answer; one P-256 certificate is under 1 KiB.
const maxCAPEM = 64 << 10

// FetchCA downloads https://head/ca.pem without checking the server's
// certificate (the agent has no trust yet), and accepts it only when it is
// exactly one PEM certificate whose DER has SHA-256 wantSHA256.
func FetchCA(ctx context.Context, head netip.AddrPort, wantSHA256 string) (*x509.Certificate, error) {
	tr := transport(&tls.Config{InsecureSkipVerify: true}) // integrity comes from the pinned hash
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 15 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+head.String()+"/ca.pem", nil)
	if err != nil {
		return nil, fmt.Errorf("fetch ca.pem: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, backoff.Transient("fetch ca.pem", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCAPEM+1))
	if err != nil {
		return nil, backoff.Transient("fetch ca.pem", err)
	}
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("fetch ca.pem: status %d", resp.StatusCode)
		if retryable(resp.StatusCode) {
			return nil, backoff.Transient("fetch ca.pem", err)
		}
		return nil, err
	}
	if len(body) > maxCAPEM {
		return nil, errors.New("fetch ca.pem: answer too large")
	}
	return ParseCA(body, wantSHA256)
}

// ParseCA accepts exactly one PEM CERTIFICATE block (nothing else but
// whitespace around it) whose DER hashes to wantSHA256.
func ParseCA(pemBytes []byte, wantSHA256 string) (*x509.Certificate, error) {
	block, rest := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("ca.pem: no PEM certificate")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("ca.pem: more than one PEM block")
	}
	sum := sha256.Sum256(block.Bytes)
	if got := hex.EncodeToString(sum[:]); got != wantSHA256 {
		return nil, fmt.Errorf("ca.pem: fingerprint %s does not match RAYVAST_CA_SHA256", got)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ca.pem: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("ca.pem: not a CA certificate")
	}
	return cert, nil
}

// TLSConfig trusts only ca (no system roots) and expects the head's
// certificate for its IP literal. client, when non-nil, is presented for
// mutual TLS on port B.
func TLSConfig(ca *x509.Certificate, head netip.Addr, client *tls.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	c := &tls.Config{RootCAs: pool, ServerName: head.String(), MinVersion: tls.VersionTLS12}
	if client != nil {
		c.Certificates = []tls.Certificate{*client}
	}
	return c
}

// HTTPClient talks to the head with tc. It never uses a proxy from the
// environment: the head is reached directly or not at all.
func HTTPClient(tc *tls.Config, timeout time.Duration) *http.Client {
	return &http.Client{Transport: transport(tc), Timeout: timeout}
}

func transport(tc *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   false,
		MaxIdleConns:        2,
		IdleConnTimeout:     90 * time.Second,
	}
}
