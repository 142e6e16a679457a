package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

func allPassing() Checks {
	return Checks{Capabilities: Check{OK: true}, Netns: Check{OK: true}, Shm: Check{OK: true},
		Egress: EgressCheck{OK: true, IP: "192.0.2.1"}}
}

// TestChecksRules proves each check failing alone: OK turns false, and
// Sandboxed too exactly for the security checks; Failed names it.
func TestChecksRules(t *testing.T) {
	if c := allPassing(); !c.OK() || !c.Sandboxed() || len(c.Failed(false)) != 0 {
		t.Fatalf("all passing: OK %v, Sandboxed %v, Failed %v; want true, true, none", c.OK(), c.Sandboxed(), c.Failed(false))
	}
	for _, tt := range []struct {
		name     string
		fail     func(*Checks)
		security bool
	}{
		{"capabilities", func(c *Checks) { c.Capabilities.OK = false }, true},
		{"netns", func(c *Checks) { c.Netns.OK = false }, true},
		{"shm", func(c *Checks) { c.Shm.OK = false }, true},
		{"egress", func(c *Checks) { c.Egress.OK = false }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := allPassing()
			tt.fail(&c)
			if c.OK() {
				t.Error("OK() = true, want false")
			}
			if got := c.Sandboxed(); got == tt.security {
				t.Errorf("Sandboxed() = %v, want %v", got, !tt.security)
			}
			if f := c.Failed(false); len(f) != 1 || f[0].Name != tt.name || f[0].Security != tt.security {
				t.Errorf("Failed(false) = %+v, want just %s", f, tt.name)
			}
		})
	}
}

// TestListNamesMatchJSON proves List's names are the report's JSON keys.
func TestListNamesMatchJSON(t *testing.T) {
	b, err := json.Marshal(allPassing())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range allPassing().List() {
		if !strings.Contains(string(b), `"`+n.Name+`":{"ok":true`) {
			t.Errorf("%s: not a key of %s", n.Name, b)
		}
	}
}

// TestBounded proves details are cut on a rune boundary and short fields
// to 64 bytes, while the original report is left alone.
func TestBounded(t *testing.T) {
	long := strings.Repeat("é", ReportDetailMax) // 2 bytes a rune: the cut falls mid-rune
	r := CheckReport{Checks: allPassing(), RayVersion: strings.Repeat("9", 100), PythonVersion: "3.12.1"}
	r.Checks.Shm.Detail, r.Checks.Egress.Detail, r.Checks.Egress.IP = long, long, long
	b := r.Bounded()
	for _, n := range b.Checks.List() {
		if len(n.Detail) > ReportDetailMax || !strings.HasPrefix(long, n.Detail) || n.Detail == "" && (n.Name == "shm" || n.Name == "egress") {
			t.Errorf("%s detail kept %d bytes, want a rune-boundary cut at ≤ %d", n.Name, len(n.Detail), ReportDetailMax)
		}
	}
	if len(b.Checks.Egress.IP) != 64 || len(b.RayVersion) != 64 || b.PythonVersion != "3.12.1" {
		t.Errorf("egress ip %d, ray %d bytes, python %q; want 64, 64, 3.12.1", len(b.Checks.Egress.IP), len(b.RayVersion), b.PythonVersion)
	}
	if r.Checks.Shm.Detail != long {
		t.Error("Bounded changed the report it was called on")
	}
}
