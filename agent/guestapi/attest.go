package guestapi

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/rayvast/rayvast/internal/wire"
)

// AttestationDomain starts every signed attestation message, so a node key
// signature over it can never be mistaken for anything else it signs (TLS
// handshakes sign their own, different, context strings).
const AttestationDomain = "rayvast:guest-api:app-key-attestation:v1"

// AttestationMessage is the exact text the node key signs.
func AttestationMessage(appID, instanceID, appPublicKeyHex string) string {
	return fmt.Sprintf("%s\napp_id=%s\ninstance_id=%s\napp_public_key=%s\n", AttestationDomain, appID, instanceID, appPublicKeyHex)
}

func (s *Server) attest() (wire.AppKeyAttestation, error) {
	if s.id == nil {
		return wire.AppKeyAttestation{}, errNoIdentity
	}
	pub := s.AppPublicKey()
	msg := AttestationMessage(s.cfg.AppID, s.id.instanceID, pub)
	r := s.cfg.Rand
	if r == nil {
		r = rand.Reader
	}
	digest := sha256.Sum256([]byte(msg))
	sig, err := ecdsa.SignASN1(r, s.id.signer.(*ecdsa.PrivateKey), digest[:])
	if err != nil {
		return wire.AppKeyAttestation{}, fmt.Errorf("sign attestation: %w", err)
	}
	return wire.AppKeyAttestation{AppID: s.cfg.AppID, InstanceID: s.id.instanceID, AppPublicKey: pub,
		Message: msg, Signature: base64.StdEncoding.EncodeToString(sig), CertChain: s.id.chainPEM}, nil
}
