package guestauth

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// Config is what the authorizer needs: the measured app identity and the
// host's (unmeasured) policy.
type Config struct {
	AppID      string
	AppRootKey secret.Bytes // 32 bytes; derives the internal issuer key
	Policy     wire.GuestAPIPolicy
}

// Authorizer turns a request's Authorization header into granted scopes.
type Authorizer struct {
	appID     string
	anonymous Scopes
	keys      Keyring
}

// NewAuthorizer validates the policy and builds the keyring. An unknown scope
// name, a bad or duplicate issuer, or a key that is not 32 hex bytes is an
// error naming the problem: the agent refuses to start rather than run with
// a permission that silently never matches.
func NewAuthorizer(cfg Config) (*Authorizer, error) {
	if cfg.AppID == "" {
		return nil, errors.New("guest api policy: empty app id")
	}
	anon, err := ParseScopeList(cfg.Policy.AnonymousScopes)
	if err != nil {
		return nil, fmt.Errorf("guest api policy: anonymous_scopes: %w", err)
	}
	internal, err := DeriveEd25519(cfg.AppRootKey.Reveal(), IssuerInfo)
	if err != nil {
		return nil, fmt.Errorf("guest api policy: internal issuer: %w", err)
	}
	keys := Keyring{InternalIssuer(cfg.AppID): {internal.Public().(ed25519.PublicKey)}}
	for i, iss := range cfg.Policy.ExternalIssuers {
		pubs, err := issuerKeys(iss)
		if err != nil {
			return nil, fmt.Errorf("guest api policy: external_issuers[%d]: %w", i, err)
		}
		if _, dup := keys[iss.Name]; dup {
			return nil, fmt.Errorf("guest api policy: external_issuers[%d]: name %q already taken (duplicate or the internal issuer)", i, iss.Name)
		}
		keys[iss.Name] = pubs
	}
	return &Authorizer{appID: cfg.AppID, anonymous: anon, keys: keys}, nil
}

func issuerKeys(iss wire.Issuer) ([]ed25519.PublicKey, error) {
	if iss.Name == "" {
		return nil, errors.New("empty name")
	}
	if len(iss.PublicKeys) == 0 {
		return nil, fmt.Errorf("issuer %q: no public_keys", iss.Name)
	}
	var out []ed25519.PublicKey
	for j, h := range iss.PublicKeys {
		k, err := ParsePublicKey(h)
		if err != nil {
			return nil, fmt.Errorf("issuer %q: public_keys[%d]: %w", iss.Name, j, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// ParsePublicKey parses a hex Ed25519 public key as written in the config.
func ParsePublicKey(h string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("not %d hex-encoded bytes", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// Anonymous returns the scopes granted without a token (a copy).
func (a *Authorizer) Anonymous() Scopes { return a.anonymous.Union(nil) }

// Grant returns the scopes a request holds: the anonymous ones, plus a
// token's when one is presented. values are the request's Authorization
// header values. A presented token that does not verify is an error (the
// caller answers 401) rather than a silent fall-back to anonymous, so a
// caller learns their token is bad. The error never contains the token.
func (a *Authorizer) Grant(values []string, now time.Time) (Scopes, error) {
	switch len(values) {
	case 0:
		return a.Anonymous(), nil
	case 1:
	default:
		return nil, fmt.Errorf("%w: several Authorization headers", ErrMalformed)
	}
	scheme, tok, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return nil, fmt.Errorf("%w: not a Bearer credential", ErrMalformed)
	}
	c, err := Verify(tok, a.keys, a.appID, now)
	if err != nil {
		return nil, err
	}
	return a.anonymous.Union(c.Scopes()), nil
}
