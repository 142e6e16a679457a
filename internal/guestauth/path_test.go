package guestauth

import (
	"strings"
	"testing"
)

// TestCanonical proves decoding comes before segment normalisation and that
// every non-canonicalisable path is refused rather than guessed at.
func TestCanonical(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/", "/"},
		{"//", "/"},
		{"/prpc/Info", "/prpc/Info"},
		{"/%70rpc/Info", "/prpc/Info"},
		{"/prpc//Info", "/prpc/Info"},
		{"/prpc/./Info", "/prpc/Info"},
		{"/prpc/x/../Info", "/prpc/Info"},
		{"/prpc/Info/", "/prpc/Info"},
		{"/prpc%2FInfo", "/prpc/Info"},
		{"/prpc/%2e%2e/prpc/Info", "/prpc/Info"},
		{"/prpc/%2E/Info", "/prpc/Info"},
		{"/%2570rpc/Info", "/%70rpc/Info"}, // decoded once only
		{"/logs/agent", "/logs/agent"},
	} {
		got, err := Canonical(c.in)
		if err != nil || got != c.want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"", "prpc/Info", "*", "/..", "/../prpc/Info", "/prpc/../../Info", "/%2e%2e/prpc/Info",
		"/prpc/%zz", "/prpc/%", "/prpc/%00Info", "/prpc/Info%0a", "/prpc\\Info", "/prpc/%5cInfo",
		"/" + strings.Repeat("a", MaxPathLen),
	} {
		if got, err := Canonical(in); err == nil {
			t.Errorf("Canonical(%q) = %q, want refusal", in, got)
		}
	}
}

// TestLookupEquivalences: every spelling of a method names the same row, so
// they all need the same scope (the seed's /prpc/Worker.Info, /prpc/v0/Info,
// /%70rpc/Info example among them).
func TestLookupEquivalences(t *testing.T) {
	for _, c := range []struct {
		paths []string
		scope Scope
		kind  Kind
		name  string
	}{
		{[]string{"/prpc/Worker.Info", "/prpc/v0/Info", "/%70rpc/Info", "/prpc/Info", "/prpc/v0/Worker.Info",
			"//prpc///Info", "/prpc/./v0/Info", "/x/../prpc/Info", "/prpc%2fInfo", "/%70%72%70%63/%49nfo"}, ScopeInfo, KindPRPC, "Info"},
		{[]string{"/prpc/v1/Info", "/prpc/v1/Worker.Info"}, ScopeInfo, KindPRPC, "Info"},
		{[]string{"/prpc/Version", "/prpc/v0/Worker.Version", "/prpc/v1/Version"}, ScopeVersion, KindPRPC, "Version"},
		{[]string{"/prpc/v1/Health", "/prpc/v1/Worker.Health", "/prpc/v1/./Health"}, ScopeHealth, KindPRPC, "Health"},
		{[]string{"/prpc/GetAttestationForAppKey", "/prpc/v0/Worker.GetAttestationForAppKey"}, ScopeAttestAppKey, KindPRPC, "GetAttestationForAppKey"},
		{[]string{"/", "//", "/.", "/prpc/..", "/%2e"}, ScopeDashboard, KindDashboard, ""},
		{[]string{"/logs/agent", "/logs//agent", "/%6cogs/agent", "/logs/ray"}, ScopeLogs, KindLogs, ""},
		{[]string{"/metrics", "/metrics/", "/./metrics"}, ScopeMetrics, KindMetrics, ""},
	} {
		for _, p := range c.paths {
			r, ok := Lookup(p, false)
			if !ok || r.Scope != c.scope || r.Kind != c.kind || (c.name != "" && r.Name != c.name) {
				t.Errorf("Lookup(%q) = %+v, %v; want kind %s scope %s name %q", p, r, ok, c.kind, c.scope, c.name)
			}
		}
	}
}

// TestLookupFailsClosed: anything the table does not name is not found,
// including methods of the wrong surface, traversal, double encoding and
// case variants; GetKey exists only on the local surface.
func TestLookupFailsClosed(t *testing.T) {
	for _, p := range []string{
		"/prpc/v1/GetAttestationForAppKey", // v0 only
		"/prpc/Health", "/prpc/v0/Health",  // v1 only
		"/prpc/GetKey", "/prpc/v0/GetKey", // local only
		"/prpc/v2/Info", "/prpc/info", "/PRPC/Info", "/prpc/Worker.", "/prpc/Worker.Worker.Info",
		"/prpc/v1", "/prpc", "/prpc/v0/v1/Info", "/logs", "/logs/", "/logs/etc", "/logs/../../etc/passwd",
		"/logs/agent/x", "/metrics/x", "/%2570rpc/Info", "/../prpc/Info", "/prpc/Info%00", "/favicon.ico",
		"/index.html", "/prpc/Info;x", "*",
	} {
		if r, ok := Lookup(p, false); ok {
			t.Errorf("Lookup(%q) = %+v, want not found", p, r)
		}
	}
	for _, p := range []string{"/prpc/GetKey", "/prpc/v0/Worker.GetKey", "/%70rpc/GetKey"} {
		if r, ok := Lookup(p, true); !ok || !r.Local || r.Name != "GetKey" {
			t.Errorf("local Lookup(%q) = %+v, %v; want the GetKey row", p, r, ok)
		}
	}
}

// TestTableScopesKnown: every remote row names a known scope.
func TestTableScopesKnown(t *testing.T) {
	for _, row := range Table {
		if row.Local {
			continue
		}
		if _, err := ParseScope(string(row.Scope)); err != nil {
			t.Errorf("row %+v: %v", row, err)
		}
	}
}

// FuzzCanonical: the canonicaliser never panics, its output is canonical
// (a fixed point with no empty, "." or ".." segments) and Lookup agrees with
// looking up the canonical form.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"/", "/prpc/Info", "/%70rpc/Info", "/prpc/v1/Worker.Health", "/../x", "/a/./b/../c",
		"/logs/agent", "/%2e%2e/", "//metrics", "/prpc%2FInfo", "/%", "/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Canonical(in)
		r1, ok1 := Lookup(in, false)
		if err != nil {
			if ok1 {
				t.Fatalf("Lookup(%q) found %+v for a non-canonicalisable path", in, r1)
			}
			return
		}
		if !strings.HasPrefix(c, "/") || strings.Contains(c, "//") {
			t.Fatalf("Canonical(%q) = %q: not canonical", in, c)
		}
		for _, seg := range strings.Split(c[1:], "/") {
			if (seg == "." || seg == ".." || seg == "") && c != "/" {
				t.Fatalf("Canonical(%q) = %q: has segment %q", in, c, seg)
			}
		}
		if !strings.Contains(c, "%") {
			if again, err := Canonical(c); err != nil || again != c {
				t.Fatalf("Canonical(%q) = %q, not a fixed point: %q, %v", in, c, again, err)
			}
			r2, ok2 := Lookup(c, false)
			if ok1 != ok2 || r1 != r2 {
				t.Fatalf("Lookup(%q) = %+v,%v but Lookup(canonical %q) = %+v,%v", in, r1, ok1, c, r2, ok2)
			}
		}
		if ok1 && r1.Path != c {
			t.Fatalf("route path %q is not the canonical %q", r1.Path, c)
		}
	})
}
