package guestauth

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Header is the only JWS header a token may carry (docs/protocol.md §9). It is compared
// as a constant, never parsed: alg none, HMAC, jku/x5u/jwk and every other
// header field cannot be expressed at all.
const Header = `{"alg":"EdDSA","typ":"JWT"}`

// encodedHeader is Header as the first segment of a compact JWS.
var encodedHeader = b64.EncodeToString([]byte(Header))

// b64 is strict unpadded base64url: non-canonical trailing bits are refused,
// so a token has exactly one spelling.
var b64 = base64.RawURLEncoding.Strict()

// Token limits.
const (
	MaxLifetime = time.Hour        // exp - iat
	Leeway      = 60 * time.Second // clock skew allowed on iat, nbf and exp
	MaxTokenLen = 4096             // bytes of the compact form
)

// Reasons a token is refused. Verify wraps them; the client only ever sees 401.
var (
	ErrMalformed     = errors.New("malformed token")
	ErrHeader        = errors.New("token header is not the EdDSA constant")
	ErrUnknownIssuer = errors.New("unknown token issuer")
	ErrSignature     = errors.New("bad token signature")
	ErrAudience      = errors.New("token audience lacks the app id")
	ErrLifetime      = errors.New("token lifetime over one hour")
	ErrExpired       = errors.New("token expired")
	ErrNotYetValid   = errors.New("token not yet valid")
)

// Claims are a token's payload. Unknown claims are ignored; the ones here
// must have these types.
type Claims struct {
	Iss   string   `json:"iss"`
	Aud   Audience `json:"aud"`
	Iat   int64    `json:"iat"`
	Exp   int64    `json:"exp"`
	Nbf   int64    `json:"nbf,omitempty"`
	Scope string   `json:"scope"`
}

// Audience is the aud claim: a string or an array of strings on the wire.
type Audience []string

// MarshalJSON writes a single audience as a plain string.
func (a Audience) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]string(a))
}

// UnmarshalJSON accepts a string or an array of strings.
func (a *Audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = Audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("aud must be a string or an array of strings")
	}
	*a = many
	return nil
}

// Contains reports whether id is one of the audiences.
func (a Audience) Contains(id string) bool {
	for _, s := range a {
		if s == id {
			return true
		}
	}
	return false
}

// Sign returns the compact JWS of c signed with key. It checks nothing: use
// Mint for tokens meant to be valid.
func Sign(key ed25519.PrivateKey, c Claims) (string, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	input := encodedHeader + "." + b64.EncodeToString(payload)
	return input + "." + b64.EncodeToString(ed25519.Sign(key, []byte(input))), nil
}

// MintRequest is what a token issuer decides.
type MintRequest struct {
	Iss    string
	Aud    []string
	Scopes []string // names; unknown ones are refused
	TTL    time.Duration
	Now    time.Time
}

// Mint signs a token that Verify will accept: known scopes only, at least
// one audience, and a lifetime of at most MaxLifetime.
func Mint(key ed25519.PrivateKey, r MintRequest) (string, error) {
	if r.Iss == "" {
		return "", errors.New("mint token: empty iss")
	}
	if len(r.Aud) == 0 {
		return "", errors.New("mint token: no audience")
	}
	if r.TTL <= 0 || r.TTL > MaxLifetime {
		return "", fmt.Errorf("mint token: lifetime %s not in (0, %s]", r.TTL, MaxLifetime)
	}
	if r.TTL%time.Second != 0 {
		return "", errors.New("mint token: lifetime must be whole seconds")
	}
	scopes, err := ParseScopeList(r.Scopes)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	if len(scopes) == 0 {
		return "", errors.New("mint token: no scope")
	}
	iat := r.Now.Unix()
	return Sign(key, Claims{Iss: r.Iss, Aud: r.Aud, Iat: iat, Exp: iat + int64(r.TTL/time.Second), Scope: scopes.String()})
}

// Keyring maps issuer names to their accepted public keys (several during a
// rotation).
type Keyring map[string][]ed25519.PublicKey

// Verify checks a compact JWS against keys for audience appID at now and
// returns its claims. Every refusal wraps one of the Err values above.
func Verify(token string, keys Keyring, appID string, now time.Time) (Claims, error) {
	if len(token) > MaxTokenLen {
		return Claims{}, fmt.Errorf("%w: too long", ErrMalformed)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("%w: want 3 segments", ErrMalformed)
	}
	if parts[0] != encodedHeader {
		return Claims{}, ErrHeader
	}
	payload, err := b64.DecodeString(parts[1])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload encoding", ErrMalformed)
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Claims{}, fmt.Errorf("%w: signature encoding", ErrMalformed)
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Claims{}, fmt.Errorf("%w: claims", ErrMalformed)
	}
	pubs, ok := keys[c.Iss]
	if !ok || c.Iss == "" {
		return Claims{}, ErrUnknownIssuer
	}
	if !verifyAny(pubs, []byte(parts[0]+"."+parts[1]), sig) {
		return Claims{}, ErrSignature
	}
	if err := checkClaims(c, appID, now); err != nil {
		return Claims{}, err
	}
	return c, nil
}

func verifyAny(pubs []ed25519.PublicKey, msg, sig []byte) bool {
	for _, pub := range pubs {
		if len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, msg, sig) {
			return true
		}
	}
	return false
}

// checkClaims applies the audience, lifetime and time-window rules.
func checkClaims(c Claims, appID string, now time.Time) error {
	if appID == "" || !c.Aud.Contains(appID) {
		return ErrAudience
	}
	if c.Iat <= 0 || c.Exp <= c.Iat || c.Exp-c.Iat > int64(MaxLifetime/time.Second) {
		return ErrLifetime
	}
	t, leeway := now.Unix(), int64(Leeway/time.Second)
	if t > c.Exp+leeway {
		return ErrExpired
	}
	if t+leeway < c.Iat || (c.Nbf != 0 && t+leeway < c.Nbf) {
		return ErrNotYetValid
	}
	return nil
}

// Scopes returns the known scopes of the scope claim. Unknown names grant
// nothing and are skipped, so an issuer newer than this agent still works
// for the scopes both know.
func (c Claims) Scopes() Scopes {
	out := Scopes{}
	for _, n := range strings.Fields(c.Scope) {
		if s, err := ParseScope(n); err == nil {
			out[s] = true
		}
	}
	return out
}
