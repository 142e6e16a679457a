package guestauth

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

func opsIssuer(keys ...string) wire.Issuer { return wire.Issuer{Name: "ops", PublicKeys: keys} }

// TestNewAuthorizerRefuses: a bad policy refuses to start, and the error
// names what is wrong.
func TestNewAuthorizerRefuses(t *testing.T) {
	good := hex.EncodeToString(pub(testKey(1)))
	for _, c := range []struct {
		name   string
		policy wire.GuestAPIPolicy
		says   string
	}{
		{"unknown anonymous scope", wire.GuestAPIPolicy{AnonymousScopes: []string{"guest:version", "guest:everything"}}, "guest:everything"},
		{"scope with space", wire.GuestAPIPolicy{AnonymousScopes: []string{"guest:version "}}, "guest:version "},
		{"key not hex", wire.GuestAPIPolicy{ExternalIssuers: []wire.Issuer{opsIssuer("zz" + good[2:])}}, `issuer "ops": public_keys[0]`},
		{"key 31 bytes", wire.GuestAPIPolicy{ExternalIssuers: []wire.Issuer{opsIssuer(good[2:])}}, `public_keys[0]`},
		{"second key bad", wire.GuestAPIPolicy{ExternalIssuers: []wire.Issuer{opsIssuer(good, "00")}}, `public_keys[1]`},
		{"no keys", wire.GuestAPIPolicy{ExternalIssuers: []wire.Issuer{opsIssuer()}}, "no public_keys"},
		{"empty name", wire.GuestAPIPolicy{ExternalIssuers: []wire.Issuer{{PublicKeys: []string{good}}}}, "empty name"},
		{"duplicate", wire.GuestAPIPolicy{ExternalIssuers: []wire.Issuer{opsIssuer(good), opsIssuer(good)}}, `"ops" already taken`},
		{"internal name", wire.GuestAPIPolicy{ExternalIssuers: []wire.Issuer{{Name: InternalIssuer(testApp), PublicKeys: []string{good}}}}, "already taken"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewAuthorizer(Config{AppID: testApp, AppRootKey: secret.NewBytes(rootKey), Policy: c.policy})
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("got %v, want an error saying %q", err, c.says)
			}
		})
	}
	if _, err := NewAuthorizer(Config{AppID: testApp, AppRootKey: secret.NewBytes(rootKey[:16])}); err == nil {
		t.Error("16-byte root key accepted")
	}
	if _, err := NewAuthorizer(Config{AppRootKey: secret.NewBytes(rootKey)}); err == nil {
		t.Error("empty app id accepted")
	}
}

// TestGrant: anonymous scopes alone without a header, their union with a
// token's, and a refusal (never a silent downgrade) for a bad credential.
func TestGrant(t *testing.T) {
	ops := testKey(1)
	a, err := NewAuthorizer(Config{AppID: testApp, AppRootKey: secret.NewBytes(rootKey), Policy: wire.GuestAPIPolicy{
		AnonymousScopes: []string{"guest:version"},
		ExternalIssuers: []wire.Issuer{opsIssuer(hex.EncodeToString(pub(ops)))}}})
	if err != nil {
		t.Fatal(err)
	}
	tok := mustSign(t, ops, goodClaims())
	for _, c := range []struct {
		name   string
		header []string
		want   string
		err    bool
	}{
		{"none", nil, "guest:version", false},
		{"bearer", []string{"Bearer " + tok}, "guest:logs guest:version", false},
		{"bearer lowercase", []string{"bearer " + tok}, "guest:logs guest:version", false},
		{"basic", []string{"Basic " + tok}, "", true},
		{"no scheme", []string{tok}, "", true},
		{"empty bearer", []string{"Bearer "}, "", true},
		{"two headers", []string{"Bearer " + tok, "Bearer " + tok}, "", true},
		{"bad token", []string{"Bearer x.y.z"}, "", true},
	} {
		got, err := a.Grant(c.header, t0)
		if (err != nil) != c.err || (err == nil && got.String() != c.want) {
			t.Errorf("%s: got %q, %v; want %q err=%v", c.name, got.String(), err, c.want, c.err)
		}
		if err != nil && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: error quotes the token", c.name)
		}
	}
	empty, _ := NewAuthorizer(Config{AppID: testApp, AppRootKey: secret.NewBytes(rootKey)})
	if got, _ := empty.Grant(nil, t0); len(got) != 0 {
		t.Errorf("absent anonymous_scopes granted %v", got)
	}
	if _, err := a.Grant([]string{"Bearer " + tok}, t0.Add(2*time.Hour)); !errors.Is(err, ErrExpired) {
		t.Errorf("expired token: %v", err)
	}
}

// TestDecide covers the three gates in order, and the dashboard blocks.
func TestDecide(t *testing.T) {
	logs, _ := Lookup("/logs/agent", false)
	info, _ := Lookup("/prpc/Info", false)
	getKey, _ := Lookup("/prpc/GetKey", true)
	all := Scopes{}
	for _, s := range AllScopes {
		all[s] = true
	}
	for _, c := range []struct {
		name    string
		r       Route
		found   bool
		granted Scopes
		sw      Switches
		want    Verdict
	}{
		{"unnamed path, all scopes", Route{}, false, all, Switches{PublicLogs: true}, Unauthorized},
		{"logs, no scope, switch off", logs, true, Scopes{}, Switches{}, Unauthorized},
		{"logs, no scope, switch on", logs, true, Scopes{}, Switches{PublicLogs: true}, Unauthorized},
		{"logs, scope, switch off", logs, true, Scopes{ScopeLogs: true}, Switches{}, NotMounted},
		{"logs, scope, switch on", logs, true, Scopes{ScopeLogs: true}, Switches{PublicLogs: true}, Allow},
		{"info, other scope", info, true, Scopes{ScopeDashboard: true}, Switches{}, Unauthorized},
		{"info, scope", info, true, Scopes{ScopeInfo: true}, Switches{}, Allow},
		{"get key local", getKey, true, Scopes{}, Switches{}, Allow},
	} {
		if got := Decide(c.r, c.found, c.granted, c.sw); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
	on := Switches{PublicLogs: true, PublicSysinfo: true, PublicTCBInfo: true}
	for _, c := range []struct {
		b     Block
		scope Scope
		sw    Switch
	}{{BlockIdentity, ScopeInfo, SwitchNone}, {BlockProcesses, ScopeContainers, SwitchNone},
		{BlockLogs, ScopeLogs, SwitchLogs}, {BlockSysinfo, ScopeMetrics, SwitchSysinfo}} {
		if !Visible(c.b, Scopes{c.scope: true}, on) {
			t.Errorf("%s hidden with %s and switches on", c.b, c.scope)
		}
		others := Scopes{}
		for _, s := range AllScopes {
			if s != c.scope {
				others[s] = true
			}
		}
		if Visible(c.b, others, on) {
			t.Errorf("%s shown without %s", c.b, c.scope)
		}
		if c.sw != SwitchNone && Visible(c.b, Scopes{c.scope: true}, Switches{}) {
			t.Errorf("%s shown with %s off", c.b, c.sw)
		}
	}
}
