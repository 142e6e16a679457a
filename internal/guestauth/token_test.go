package guestauth

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 10, 0, 0, time.UTC)

const testApp = "app-1"

// testKey is a fixed Ed25519 key (seed byte b repeated).
func testKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed([]byte(strings.Repeat(string([]byte{b}), 32)))
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func goodClaims() Claims {
	return Claims{Iss: "ops", Aud: Audience{testApp}, Iat: t0.Unix(), Exp: t0.Add(time.Hour).Unix(), Scope: "guest:logs"}
}

// rawToken builds a compact JWS from arbitrary header and payload bytes.
func rawToken(key ed25519.PrivateKey, header, payload []byte) string {
	in := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	return in + "." + b64.EncodeToString(ed25519.Sign(key, []byte(in)))
}

func mustSign(t *testing.T, k ed25519.PrivateKey, c Claims) string {
	t.Helper()
	s, err := Sign(k, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestVerifyRefusals: each way a token can be wrong is refused, with the
// reason the log will name.
func TestVerifyRefusals(t *testing.T) {
	ops, other := testKey(1), testKey(2)
	keys := Keyring{"ops": {pub(ops)}}
	good := mustSign(t, ops, goodClaims())
	if _, err := Verify(good, keys, testApp, t0); err != nil {
		t.Fatalf("good token refused: %v", err)
	}
	with := func(mut func(*Claims)) string {
		c := goodClaims()
		mut(&c)
		return mustSign(t, ops, c)
	}
	payload, _ := json.Marshal(goodClaims())
	parts := strings.Split(good, ".")
	tampered, _ := json.Marshal(Claims{Iss: "ops", Aud: Audience{testApp}, Iat: t0.Unix(), Exp: t0.Add(time.Hour).Unix(), Scope: "guest:logs guest:info"})
	for _, c := range []struct {
		name string
		tok  string
		now  time.Time
		want error
	}{
		{"expired", good, t0.Add(time.Hour + 61*time.Second), ErrExpired},
		{"not yet valid (iat in future)", good, t0.Add(-61 * time.Second), ErrNotYetValid},
		{"nbf in future", with(func(c *Claims) { c.Nbf = t0.Add(10 * time.Minute).Unix() }), t0, ErrNotYetValid},
		{"lifetime over an hour", with(func(c *Claims) { c.Exp = c.Iat + 3601 }), t0, ErrLifetime},
		{"exp before iat", with(func(c *Claims) { c.Exp = c.Iat - 1 }), t0, ErrLifetime},
		{"no iat", with(func(c *Claims) { c.Iat = 0 }), t0, ErrLifetime},
		{"wrong iss", with(func(c *Claims) { c.Iss = "opz" }), t0, ErrUnknownIssuer},
		{"empty iss", with(func(c *Claims) { c.Iss = "" }), t0, ErrUnknownIssuer},
		{"wrong aud", with(func(c *Claims) { c.Aud = Audience{"other-app"} }), t0, ErrAudience},
		{"no aud", with(func(c *Claims) { c.Aud = nil }), t0, ErrAudience},
		{"unknown key", mustSign(t, other, goodClaims()), t0, ErrSignature},
		{"alg none unsigned", b64.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + ".", t0, ErrHeader},
		{"alg none signed", rawToken(ops, []byte(`{"alg":"none","typ":"JWT"}`), payload), t0, ErrHeader},
		{"alg HS256", rawToken(ops, []byte(`{"alg":"HS256","typ":"JWT"}`), payload), t0, ErrHeader},
		{"extra header field", rawToken(ops, []byte(`{"alg":"EdDSA","typ":"JWT","kid":"1"}`), payload), t0, ErrHeader},
		{"header jwk", rawToken(ops, []byte(`{"alg":"EdDSA","jwk":{},"typ":"JWT"}`), payload), t0, ErrHeader},
		{"header reordered", rawToken(ops, []byte(`{"typ":"JWT","alg":"EdDSA"}`), payload), t0, ErrHeader},
		{"header whitespace", rawToken(ops, []byte(`{"alg": "EdDSA","typ":"JWT"}`), payload), t0, ErrHeader},
		{"header padded", parts[0] + "=." + parts[1] + "." + parts[2], t0, ErrHeader},
		{"header std base64", base64.StdEncoding.EncodeToString([]byte(Header+" ")) + "." + parts[1] + "." + parts[2], t0, ErrHeader},
		{"tampered claims", parts[0] + "." + b64.EncodeToString(tampered) + "." + parts[2], t0, ErrSignature},
		{"tampered signature", parts[0] + "." + parts[1] + "." + flip(parts[2]), t0, ErrSignature},
		{"garbage", "garbage", t0, ErrMalformed},
		{"empty", "", t0, ErrMalformed},
		{"two segments", parts[0] + "." + parts[1], t0, ErrMalformed},
		{"four segments", good + ".x", t0, ErrMalformed},
		{"payload not base64", parts[0] + ".!!!." + parts[2], t0, ErrMalformed},
		{"payload not json", rawToken(ops, []byte(Header), []byte("nope")), t0, ErrMalformed},
		{"iat not a number", rawToken(ops, []byte(Header), []byte(`{"iss":"ops","aud":"app-1","iat":"1","exp":2,"scope":""}`)), t0, ErrMalformed},
		{"aud a number", rawToken(ops, []byte(Header), []byte(`{"iss":"ops","aud":7,"iat":1,"exp":2,"scope":""}`)), t0, ErrMalformed},
		{"signature short", parts[0] + "." + parts[1] + ".AAAA", t0, ErrMalformed},
		{"too long", parts[0] + "." + strings.Repeat("A", MaxTokenLen) + "." + parts[2], t0, ErrMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Verify(c.tok, keys, testApp, c.now)
			if !errors.Is(err, c.want) {
				t.Errorf("got %v, want %v", err, c.want)
			}
		})
	}
}

func flip(s string) string {
	b := []byte(s)
	if b[0] == 'A' {
		b[0] = 'B'
	} else {
		b[0] = 'A'
	}
	return string(b)
}

// TestVerifyAccepts: the edges that must pass — leeway on both sides, an
// audience array holding the app id, exactly one hour of lifetime.
func TestVerifyAccepts(t *testing.T) {
	ops := testKey(1)
	keys := Keyring{"ops": {pub(ops)}}
	for _, c := range []struct {
		name string
		mut  func(*Claims)
		now  time.Time
	}{
		{"exact hour, at exp+leeway", func(*Claims) {}, t0.Add(time.Hour + 60*time.Second)},
		{"iat within leeway ahead", func(*Claims) {}, t0.Add(-60 * time.Second)},
		{"aud array", func(c *Claims) { c.Aud = Audience{"x", testApp} }, t0},
		{"nbf now", func(c *Claims) { c.Nbf = t0.Unix() }, t0},
	} {
		cl := goodClaims()
		c.mut(&cl)
		if _, err := Verify(mustSign(t, ops, cl), keys, testApp, c.now); err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
	}
}

// TestKeyRotation: an issuer with two keys accepts tokens of either; after
// the old key is dropped its tokens fail.
func TestKeyRotation(t *testing.T) {
	old, nu := testKey(1), testKey(3)
	tokOld, tokNew := mustSign(t, old, goodClaims()), mustSign(t, nu, goodClaims())
	both := Keyring{"ops": {pub(old), pub(nu)}}
	for _, tok := range []string{tokOld, tokNew} {
		if _, err := Verify(tok, both, testApp, t0); err != nil {
			t.Errorf("during rotation: refused: %v", err)
		}
	}
	after := Keyring{"ops": {pub(nu)}}
	if _, err := Verify(tokOld, after, testApp, t0); !errors.Is(err, ErrSignature) {
		t.Errorf("old key after rotation: got %v, want ErrSignature", err)
	}
	if _, err := Verify(tokNew, after, testApp, t0); err != nil {
		t.Errorf("new key after rotation: %v", err)
	}
}

// TestMintLimits: the minting side refuses what Verify would refuse.
func TestMintLimits(t *testing.T) {
	k := testKey(1)
	ok := MintRequest{Iss: "ops", Aud: []string{testApp}, Scopes: []string{"guest:logs"}, TTL: time.Hour, Now: t0}
	tok, err := Mint(k, ok)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Verify(tok, Keyring{"ops": {pub(k)}}, testApp, t0)
	if err != nil || !c.Scopes().Has(ScopeLogs) || len(c.Scopes()) != 1 {
		t.Fatalf("minted token: %+v, %v", c, err)
	}
	for name, mut := range map[string]func(*MintRequest){
		"ttl over an hour": func(r *MintRequest) { r.TTL = time.Hour + time.Second },
		"ttl zero":         func(r *MintRequest) { r.TTL = 0 },
		"unknown scope":    func(r *MintRequest) { r.Scopes = []string{"guest:everything"} },
		"no scope":         func(r *MintRequest) { r.Scopes = nil },
		"no aud":           func(r *MintRequest) { r.Aud = nil },
		"no iss":           func(r *MintRequest) { r.Iss = "" },
	} {
		r := ok
		mut(&r)
		if _, err := Mint(k, r); err == nil {
			t.Errorf("%s: minted", name)
		}
	}
}

// TestClaimsScopesIgnoreUnknown: unknown scope names in a token grant nothing.
func TestClaimsScopesIgnoreUnknown(t *testing.T) {
	got := Claims{Scope: "guest:logs guest:root  guest:info"}.Scopes()
	if len(got) != 2 || !got.Has(ScopeLogs) || !got.Has(ScopeInfo) {
		t.Errorf("got %v", got)
	}
}

// FuzzVerify: the parser never panics, and whatever it accepts is signed by
// the one key in the ring and within every limit.
func FuzzVerify(f *testing.F) {
	k := testKey(1)
	keys := Keyring{"ops": {pub(k)}}
	good, _ := Sign(k, goodClaims())
	f.Add(good)
	f.Add("")
	f.Add("a.b.c")
	f.Add(encodedHeader + ".e30." + strings.Repeat("A", 86))
	f.Add(rawToken(k, []byte(`{"alg":"none"}`), []byte(`{}`)))
	f.Add(rawToken(k, []byte(Header), []byte(`{"iss":"ops","aud":["app-1"],"iat":1796040000,"exp":1796043600,"scope":"guest:info"}`)))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify(tok, keys, testApp, t0)
		if err != nil {
			return
		}
		parts := strings.Split(tok, ".")
		sig, _ := b64.DecodeString(parts[2])
		if parts[0] != encodedHeader || !ed25519.Verify(pub(k), []byte(parts[0]+"."+parts[1]), sig) {
			t.Fatalf("accepted a token not signed by the ring's key: %q", tok)
		}
		if c.Iss != "ops" || !c.Aud.Contains(testApp) || c.Exp-c.Iat > 3600 || c.Exp <= c.Iat {
			t.Fatalf("accepted claims beyond the limits: %+v", c)
		}
	})
}
