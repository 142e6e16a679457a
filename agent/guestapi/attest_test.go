package guestapi

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/rayvast/rayvast/internal/wire"
)

// verifyAttestation is the verifier's side, kept with the tests because no
// rayvast code runs it (an app checking a node's app key does). It checks
// an app key attestation against the cluster CA (roots; the chain's own CA
// copy is never trusted): the node cert chains to roots, names
// a.InstanceID, and its key signed exactly the message naming a.AppID,
// a.InstanceID and a.AppPublicKey. On success the caller knows which
// instance holds the app key.
func verifyAttestation(a wire.AppKeyAttestation, roots *x509.CertPool) error {
	ders, err := certsFromPEM([]byte(a.CertChain))
	if err != nil {
		return fmt.Errorf("verify attestation: chain: %w", err)
	}
	leaf, err := x509.ParseCertificate(ders[0])
	if err != nil {
		return fmt.Errorf("verify attestation: node cert: %w", err)
	}
	inter := x509.NewCertPool()
	for _, d := range ders[1:] {
		c, err := x509.ParseCertificate(d)
		if err != nil {
			return fmt.Errorf("verify attestation: chain: %w", err)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("verify attestation: node cert: %w", err)
	}
	if instanceID(leaf) != a.InstanceID {
		return errors.New("verify attestation: instance id is not the node cert's")
	}
	if _, err := hex.DecodeString(a.AppPublicKey); err != nil || len(a.AppPublicKey) != 64 {
		return errors.New("verify attestation: app public key is not 32 hex bytes")
	}
	if a.Message != AttestationMessage(a.AppID, a.InstanceID, a.AppPublicKey) {
		return errors.New("verify attestation: message does not name this app key")
	}
	sig, err := base64.StdEncoding.DecodeString(a.Signature)
	if err != nil {
		return errors.New("verify attestation: signature encoding")
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok {
		return errors.New("verify attestation: node key is not ECDSA")
	}
	digest := sha256.Sum256([]byte(a.Message))
	if !ecdsa.VerifyASN1(pub, digest[:], sig) {
		return errors.New("verify attestation: bad signature")
	}
	return nil
}
