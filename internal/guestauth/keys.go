package guestauth

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"time"
)

// Key derivation domains. IssuerInfo is final (docs/protocol.md §9): it is a contract
// between every agent that derives the internal issuer key, so it is never
// versioned again. AppKeyInfo names the key GetAttestationForAppKey attests.
const (
	IssuerInfo = "rayvast:guest-api:issuer:v1"
	AppKeyInfo = "rayvast:guest-api:app-key:v1"
)

// AppRootKeyLen is the length of the app root key (docs/protocol.md §6, §9).
const AppRootKeyLen = 32

// HealthTokenPeriod is how often the internal health token changes: its iat
// is floored to this, and it lives twice as long, so it always has at least
// this much left.
const HealthTokenPeriod = 30 * time.Minute

// InternalIssuer is the iss of tokens signed by the app's own issuer key.
func InternalIssuer(appID string) string { return "rayvast:guest-api:" + appID }

// DeriveSeed is HKDF-SHA256(ikm appRootKey, empty salt, info) → 32 bytes: the
// internal issuer key, the app key and every GetKey answer.
func DeriveSeed(appRootKey []byte, info string) ([]byte, error) {
	if len(appRootKey) != AppRootKeyLen {
		return nil, fmt.Errorf("derive key: app root key must be %d bytes", AppRootKeyLen)
	}
	seed, err := hkdf.Key(sha256.New, appRootKey, nil, info, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("derive key: %w", err)
	}
	return seed, nil
}

// DeriveEd25519 returns the Ed25519 key whose seed is DeriveSeed(…, info).
func DeriveEd25519(appRootKey []byte, info string) (ed25519.PrivateKey, error) {
	seed, err := DeriveSeed(appRootKey, info)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// MintHealthToken signs the agent's guest:health token with the internal
// issuer key: aud = appID, iat = now floored to the half hour, exp = iat + 1h.
// Ed25519 is deterministic, so every call within one half hour returns the
// same token, and it never has under 30 minutes left.
func MintHealthToken(appID string, appRootKey []byte, now time.Time) (string, error) {
	key, err := DeriveEd25519(appRootKey, IssuerInfo)
	if err != nil {
		return "", fmt.Errorf("mint health token: %w", err)
	}
	period := int64(HealthTokenPeriod / time.Second)
	iat := now.Unix() - mod(now.Unix(), period)
	return Sign(key, Claims{
		Iss:   InternalIssuer(appID),
		Aud:   Audience{appID},
		Iat:   iat,
		Exp:   iat + int64(MaxLifetime/time.Second),
		Scope: string(ScopeHealth),
	})
}

// mod is a non-negative remainder, so times before 1970 floor correctly too.
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
