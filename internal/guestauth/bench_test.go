package guestauth

import (
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
)

// BenchmarkGrantToken is the per-request cost of a token: parse, Ed25519
// verify, claim checks.
func BenchmarkGrantToken(b *testing.B) {
	a, err := NewAuthorizer(Config{AppID: testApp, AppRootKey: secret.NewBytes(rootKey)})
	if err != nil {
		b.Fatal(err)
	}
	tok, _ := MintHealthToken(testApp, rootKey, t0)
	h := []string{"Bearer " + tok}
	for b.Loop() {
		if _, err := a.Grant(h, t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookup is the per-request cost of canonicalising and matching a path.
func BenchmarkLookup(b *testing.B) {
	for b.Loop() {
		if _, ok := Lookup("/%70rpc/v0/./Worker.Info", false); !ok {
			b.Fatal("not found")
		}
	}
}

// BenchmarkMintHealthToken is what each heartbeat pays to re-mint its token.
func BenchmarkMintHealthToken(b *testing.B) {
	now := time.Unix(0, 0)
	for b.Loop() {
		if _, err := MintHealthToken(testApp, rootKey, now); err != nil {
			b.Fatal(err)
		}
	}
}
