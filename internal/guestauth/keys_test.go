package guestauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
)

var rootKey = bytes.Repeat([]byte{7}, 32)

// hkdfByHand is RFC 5869 with SHA-256, an empty salt and one output block,
// written out so the test does not trust the code it checks.
func hkdfByHand(ikm []byte, info string) []byte {
	ext := hmac.New(sha256.New, make([]byte, sha256.Size))
	ext.Write(ikm)
	prk := ext.Sum(nil)
	exp := hmac.New(sha256.New, prk)
	exp.Write([]byte(info))
	exp.Write([]byte{1})
	return exp.Sum(nil)[:32]
}

// TestDeriveSeedDomain pins the derivation and the final domain strings.
func TestDeriveSeedDomain(t *testing.T) {
	for _, info := range []string{"rayvast:guest-api:issuer:v1", "rayvast:guest-api:app-key:v1", "my/app/key"} {
		got, err := DeriveSeed(rootKey, info)
		if err != nil || !bytes.Equal(got, hkdfByHand(rootKey, info)) {
			t.Errorf("DeriveSeed(%q) = %x, %v; want %x", info, got, err, hkdfByHand(rootKey, info))
		}
	}
	if IssuerInfo != "rayvast:guest-api:issuer:v1" {
		t.Errorf("the issuer domain string is final; got %q", IssuerInfo)
	}
	if _, err := DeriveSeed(rootKey[:31], IssuerInfo); err == nil {
		t.Error("31-byte root key accepted")
	}
}

// TestHealthTokenHalfHour: every mint in the same half hour gives the same
// token, it always has at least 30 minutes left, it changes at the next half
// hour, and the agent's own authorizer grants exactly guest:health for it.
func TestHealthTokenHalfHour(t *testing.T) {
	a, err := NewAuthorizer(Config{AppID: testApp, AppRootKey: secret.NewBytes(rootKey)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	byHalfHour := map[int64]string{}
	for s := int64(0); s < 2*3600; s += 7 { // every 7 s over two hours
		now := start.Add(time.Duration(s) * time.Second)
		tok, err := MintHealthToken(testApp, rootKey, now)
		if err != nil {
			t.Fatal(err)
		}
		slot := s / 1800
		if prev, ok := byHalfHour[slot]; ok && prev != tok {
			t.Fatalf("at %s: token differs from earlier in the same half hour", now)
		} else if !ok {
			for other, ot := range byHalfHour {
				if ot == tok {
					t.Fatalf("half hours %d and %d share a token", other, slot)
				}
			}
			byHalfHour[slot] = tok
		}
		c, err := Verify(tok, a.keys, testApp, now)
		if err != nil {
			t.Fatalf("at %s: own token refused: %v", now, err)
		}
		if left := time.Unix(c.Exp, 0).Sub(now); left < 30*time.Minute {
			t.Fatalf("at %s: only %s left", now, left)
		}
		if c.Iss != "rayvast:guest-api:"+testApp || c.Scope != "guest:health" || c.Exp-c.Iat != 3600 || c.Iat%1800 != 0 {
			t.Fatalf("claims %+v", c)
		}
		got, err := a.Grant([]string{"Bearer " + tok}, now)
		if err != nil || len(got) != 1 || !got.Has(ScopeHealth) {
			t.Fatalf("grant = %v, %v; want only guest:health", got, err)
		}
	}
	if len(byHalfHour) != 4 {
		t.Errorf("got %d distinct tokens over two hours, want 4", len(byHalfHour))
	}
	other, _ := MintHealthToken("app-2", rootKey, start)
	if _, err := a.Grant([]string{"Bearer " + other}, start); err == nil {
		t.Error("another app's health token accepted")
	}
	if _, err := MintHealthToken(testApp, []byte("short"), start); err == nil || strings.Contains(err.Error(), "short") {
		t.Errorf("short root key: %v", err)
	}
}
