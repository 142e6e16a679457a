package guestapi

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// InstanceURIPrefix starts the node cert's one URI SAN (docs/protocol.md §7).
const InstanceURIPrefix = "rayvast:instance/"

// identity is the node's cert and key: TLS on the TCP surface and the signer
// of app key attestations.
type identity struct {
	tls        tls.Certificate
	signer     crypto.Signer
	leaf       *x509.Certificate
	instanceID string
	chainPEM   string // node cert, any intermediates, then the CA
}

func newIdentity(certPEM, keyPEM, caPEM []byte) (*identity, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, errors.New("node cert and node key go together")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("cert/key pair: %w", err)
	}
	signer, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("node key is not ECDSA")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("node cert: %w", err)
	}
	ders := pair.Certificate
	if len(caPEM) > 0 {
		ca, err := certsFromPEM(caPEM)
		if err != nil {
			return nil, fmt.Errorf("ca cert: %w", err)
		}
		for _, c := range ca {
			if !containsDER(ders, c) {
				ders = append(ders, c)
			}
		}
	}
	var chain strings.Builder
	for _, d := range ders {
		_ = pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: d})
	}
	return &identity{tls: pair, signer: signer, leaf: leaf, instanceID: instanceID(leaf), chainPEM: chain.String()}, nil
}

// instanceID reads the instance id from the cert's rayvast URI SAN.
func instanceID(c *x509.Certificate) string {
	for _, u := range c.URIs {
		if s := u.String(); strings.HasPrefix(s, InstanceURIPrefix) {
			return strings.TrimPrefix(s, InstanceURIPrefix)
		}
	}
	return ""
}

func certsFromPEM(b []byte) ([][]byte, error) {
	var out [][]byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, err
		}
		out = append(out, blk.Bytes)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

func containsDER(list [][]byte, d []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, d) {
			return true
		}
	}
	return false
}

// tlsConfig serves the node cert on the TCP surface.
func (id *identity) tlsConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{id.tls}, MinVersion: tls.VersionTLS12}
}
