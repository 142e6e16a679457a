package wire

import "unicode/utf8"

// NamedCheck is one host check under its name in the report's JSON.
type NamedCheck struct {
	Name string
	// Security: a failure means the container is no sandbox to trust Ray
	// in, a security refusal (docs/protocol.md §6 step 4). Egress is about the network.
	Security bool
	Check
}

// checkRef points at one check of a Checks: the one table of the checks'
// names and of which must pass for what, that List, Sandboxed, OK and
// Bounded read.
type checkRef struct {
	name     string
	security bool
	ok       *bool
	detail   *string
}

func (c *Checks) refs() []checkRef {
	return []checkRef{
		{"capabilities", true, &c.Capabilities.OK, &c.Capabilities.Detail},
		{"netns", true, &c.Netns.OK, &c.Netns.Detail},
		{"shm", true, &c.Shm.OK, &c.Shm.Detail},
		{"egress", false, &c.Egress.OK, &c.Egress.Detail},
	}
}

// List is every host check in report order; egress without its IP, which
// only the head can judge (against the rental's address).
func (c Checks) List() []NamedCheck {
	var out []NamedCheck
	for _, r := range c.refs() {
		out = append(out, NamedCheck{Name: r.name, Security: r.security, Check: Check{OK: *r.ok, Detail: *r.detail}})
	}
	return out
}

// Failed lists the checks that failed, the security ones only if
// securityOnly.
func (c Checks) Failed(securityOnly bool) []NamedCheck {
	var out []NamedCheck
	for _, n := range c.List() {
		if !n.OK && (n.Security || !securityOnly) {
			out = append(out, n)
		}
	}
	return out
}

// Sandboxed reports whether every security check passed: the head refuses
// the host as insecure otherwise, before it looks at anything else.
func (c Checks) Sandboxed() bool { return len(c.Failed(true)) == 0 }

// OK reports whether every check passed: `agent check` exits 0 exactly
// then. (The GPUs and the egress IP are judged by the head.)
func (c Checks) OK() bool { return len(c.Failed(false)) == 0 }

// reportFieldMax bounds the short fields of a bounded report.
const reportFieldMax = 64

// Bounded is r with every check detail cut to ReportDetailMax bytes and the
// egress IP and versions to 64, on rune boundaries: a hostile host must not
// fill the head's store with what it reports.
func (r CheckReport) Bounded() CheckReport {
	for _, ref := range r.Checks.refs() {
		*ref.detail = cutUTF8(*ref.detail, ReportDetailMax)
	}
	r.Checks.Egress.IP = cutUTF8(r.Checks.Egress.IP, reportFieldMax)
	r.RayVersion = cutUTF8(r.RayVersion, reportFieldMax)
	r.PythonVersion = cutUTF8(r.PythonVersion, reportFieldMax)
	return r
}

// cutUTF8 is s cut to at most n bytes, on a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
