package guestapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// scopeRoutes is one path per remote route, with the scope and switch it needs.
var scopeRoutes = []struct {
	scope guestauth.Scope
	path  string
	sw    guestauth.Switch
}{
	{guestauth.ScopeVersion, "/prpc/v1/Version", guestauth.SwitchNone},
	{guestauth.ScopeVersion, "/prpc/Version", guestauth.SwitchNone},
	{guestauth.ScopeHealth, "/prpc/v1/Health", guestauth.SwitchNone},
	{guestauth.ScopeInfo, "/prpc/Info", guestauth.SwitchNone},
	{guestauth.ScopeInfo, "/prpc/v1/Info", guestauth.SwitchNone},
	{guestauth.ScopeAttestAppKey, "/prpc/GetAttestationForAppKey", guestauth.SwitchNone},
	{guestauth.ScopeDashboard, "/", guestauth.SwitchNone},
	{guestauth.ScopeLogs, "/logs/agent", guestauth.SwitchLogs},
	{guestauth.ScopeMetrics, "/metrics", guestauth.SwitchSysinfo},
}

func withLog(cfg *Config) {
	ring := NewLogRing(1 << 10)
	fmt.Fprint(ring, "agent log line\n")
	cfg.Logs = map[string]LogSource{"agent": ring}
}

// TestScopeMatrix: every scope × grant source (none, anonymous, token) ×
// measured switches (all off, all on), against every route of a real HTTPS
// server. A route answers only to its own scope; a scope held for a route
// whose switch is off gets 404 (not mounted); everything else is 401 with
// WWW-Authenticate: Bearer. guest:containers opens no route (it is a block).
func TestScopeMatrix(t *testing.T) {
	for _, on := range []bool{false, true} {
		for _, source := range []string{"none", "anonymous", "token"} {
			for _, scope := range guestauth.AllScopes {
				name := fmt.Sprintf("switches=%v/%s/%s", on, source, scope)
				t.Run(name, func(t *testing.T) {
					r := start(t, func(c *Config) {
						withLog(c)
						c.PublicLogs, c.PublicSysinfo, c.PublicTCBInfo = on, on, on
						if source == "anonymous" {
							c.Policy.AnonymousScopes = []string{string(scope)}
						}
					})
					tok := ""
					if source == "token" {
						tok = token(t, string(scope))
					}
					for _, rt := range scopeRoutes {
						want := http.StatusUnauthorized
						if rt.scope == scope && source != "none" {
							want = http.StatusOK
							if !on && rt.sw != guestauth.SwitchNone {
								want = http.StatusNotFound
							}
						}
						code, h, body := r.raw(t, "GET", rt.path, tok)
						if code != want {
							t.Errorf("GET %s: got %d, want %d (%s)", rt.path, code, want, body)
						}
						if code == http.StatusUnauthorized && (h.Get("WWW-Authenticate") != "Bearer" || body != "{\"error\":\"unauthorized\"}\n") {
							t.Errorf("GET %s: 401 without the one answer: %q %q", rt.path, h.Get("WWW-Authenticate"), body)
						}
					}
					assertNoSecrets(t, r.logs.String(), tok)
				})
			}
		}
	}
}

// TestPathEquivalences: the seed's spellings of Info all need guest:info,
// over the wire, and traversal never reaches another route or a file.
func TestPathEquivalences(t *testing.T) {
	r := start(t, func(c *Config) { withLog(c); c.PublicLogs = true })
	info, logs := token(t, "guest:info"), token(t, "guest:logs", "guest:version")
	for _, p := range []string{"/prpc/Worker.Info", "/prpc/v0/Info", "/%70rpc/Info", "/prpc/v1/Worker.Info",
		"//prpc/./Info", "/prpc/x/../Info", "/prpc%2FInfo", "/logs/../prpc/Info", "/logs/agent/../../prpc/Info"} {
		if code, _, body := r.raw(t, "GET", p, info); code != http.StatusOK || !strings.Contains(body, `"app_id":"app-1"`) {
			t.Errorf("GET %s with guest:info: %d %s", p, code, body)
		}
		if code, _, _ := r.raw(t, "GET", p, logs); code != http.StatusUnauthorized {
			t.Errorf("GET %s with guest:logs: %d, want 401", p, code)
		}
		if code, _, _ := r.raw(t, "GET", p, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s anonymous: %d, want 401", p, code)
		}
	}
	for _, p := range []string{"/logs/../../../etc/passwd", "/logs/%2e%2e/%2e%2e/etc/passwd", "/logs/..%2f..%2fetc%2fpasswd",
		"/logs/agent%2f..%2f..%2fetc%2fpasswd", "/../logs/agent", "/%2e%2e/logs/agent", "/logs/agent%00", "/logs/.agent",
		"/logs/%2570", "/%252e%252e/logs/agent", "/logs\\agent", "/prpc/GetKey", "/prpc/v0/GetKey", "/favicon.ico"} {
		code, _, body := r.raw(t, "GET", p, logs)
		if code != http.StatusUnauthorized || strings.Contains(body, "root:") || strings.Contains(body, "agent log line") {
			t.Errorf("GET %s: %d %q, want 401", p, code, body)
		}
	}
	if code, _, body := r.raw(t, "GET", "/logs//agent", logs); code != http.StatusOK || body != "agent log line\n" {
		t.Errorf("GET /logs//agent: %d %q", code, body)
	}
}

// TestMethods: a known route with a wrong method is 405, after auth.
func TestMethods(t *testing.T) {
	r := start(t, func(c *Config) { c.Policy.AnonymousScopes = []string{"guest:dashboard", "guest:version"} })
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/prpc/Version", 200}, {"GET", "/prpc/Version", 200}, {"DELETE", "/prpc/Version", 405},
		{"POST", "/", 405}, {"HEAD", "/", 200}, {"DELETE", "/prpc/Info", 401},
	} {
		if code, _, _ := r.raw(t, c.method, c.path, ""); code != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, code, c.want)
		}
	}
}

// TestBadTokenIsNotDowngraded: a bad token is refused even where anonymous
// callers are let in, so its holder learns it is bad.
func TestBadTokenIsNotDowngraded(t *testing.T) {
	r := start(t, func(c *Config) { c.Policy.AnonymousScopes = []string{"guest:version"} })
	if code, _, _ := r.raw(t, "GET", "/prpc/Version", ""); code != 200 {
		t.Fatalf("anonymous: %d", code)
	}
	bad := token(t, "guest:version")
	bad = bad[:len(bad)-4] + "AAAA"
	if code, _, _ := r.raw(t, "GET", "/prpc/Version", bad); code != 401 {
		t.Errorf("bad token: %d, want 401", code)
	}
	if !strings.Contains(r.logs.String(), "bad token signature") {
		t.Errorf("refusal reason not logged: %s", r.logs.String())
	}
	assertNoSecrets(t, r.logs.String(), bad, bad[:40])
}

// TestInfoTCB: the tcb block and the TCB call behind it exist only with
// public_tcbinfo; Info names the switches and the instance from the cert.
func TestInfoTCB(t *testing.T) {
	for _, on := range []bool{false, true} {
		calls := 0
		r := start(t, func(c *Config) {
			c.PublicTCBInfo = on
			c.TCB = func() wire.GuestTCB { calls++; return wire.GuestTCB{AgentSHA256: "feed"} }
		})
		code, _, body := r.raw(t, "GET", "/prpc/v1/Info", token(t, "guest:info"))
		var in wire.GuestInfo
		if err := json.Unmarshal([]byte(body), &in); err != nil || code != 200 {
			t.Fatalf("info: %d %s %v", code, body, err)
		}
		if (in.TCB != nil) != on || (calls > 0) != on || in.PublicTCBInfo != on {
			t.Errorf("public_tcbinfo=%v: tcb=%v calls=%d", on, in.TCB, calls)
		}
		if on && in.TCB.AgentSHA256 != "feed" {
			t.Errorf("tcb = %+v", in.TCB)
		}
		if in.InstanceID != "inst-7" || in.AppID != testApp || in.AppPublicKey != r.srv.AppPublicKey() {
			t.Errorf("info = %+v", in)
		}
	}
}

// TestNewRefuses: a bad config refuses to build, naming the problem.
func TestNewRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  func(*Config)
		says string
	}{
		{"unknown scope", func(c *Config) { c.Policy.AnonymousScopes = []string{"guest:all"} }, "guest:all"},
		{"bad key", func(c *Config) { c.Policy.ExternalIssuers[0].PublicKeys = []string{"abcd"} }, `issuer "ops"`},
		{"empty app id", func(c *Config) { c.AppID = "" }, "app id"},
		{"short root key", func(c *Config) { c.AppRootKey = secret.NewBytes(testRoot[:16]) }, "32 bytes"},
		{"unknown log", func(c *Config) { c.LogFiles = map[string]string{"../etc": "/etc/passwd"} }, `log "../etc"`},
		{"cert without key", func(c *Config) { c.NodeKeyPEM = secret.Bytes{} }, "go together"},
	} {
		cfg := baseConfig(t, &rvtest.Buffer{})
		c.mut(&cfg)
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.says)
		}
	}
}

// TestRefusalsDoNotFloodTheLog proves a stranger's requests cannot write to
// the agent's log at its level (Info): the log goes to the container's
// public log and to /logs/agent, where a flood of refusals would push out
// everything else. Reasons stay available at Debug.
func TestRefusalsDoNotFloodTheLog(t *testing.T) {
	var info rvtest.Buffer
	r := start(t, func(c *Config) { c.Log = slog.New(slog.NewTextHandler(&info, nil)) })
	bad := token(t, "guest:version")
	bad = bad[:len(bad)-4] + "AAAA"
	for _, tok := range []string{bad, "junk", ""} {
		for _, path := range []string{"/prpc/Version", "/nowhere", "/prpc/Worker.GetKey"} {
			if code, _, _ := r.raw(t, "GET", path, tok); code != 401 {
				t.Errorf("GET %s: %d, want 401", path, code)
			}
		}
	}
	if s := info.String(); s != "" {
		t.Errorf("refused requests were logged at Info:\n%s", s)
	}
}
