// Package guestauth owns every access decision of the guest API (docs/protocol.md §9,
// seed 002): the scope names, the route→scope table with its path
// canonicaliser, the compact-JWS tokens (internal and external issuers), and
// the key derivations from the app root key. The server in agent/guestapi
// asks this package once per request and routes exactly the canonical route
// it was given: there is no second path parser.
package guestauth

import (
	"fmt"
	"sort"
	"strings"
)

// Scope is one permission a token or the host's config can grant. The names
// are the seed's, verbatim.
type Scope string

const (
	ScopeVersion      Scope = "guest:version"        // Worker.Version on either pRPC surface
	ScopeHealth       Scope = "guest:health"         // Worker.Health (/prpc/v1)
	ScopeInfo         Scope = "guest:info"           // Worker.Info, and the dashboard's identity block
	ScopeAttestAppKey Scope = "guest:attest-app-key" // Worker.GetAttestationForAppKey
	ScopeDashboard    Scope = "guest:dashboard"      // the dashboard page itself
	ScopeContainers   Scope = "guest:containers"     // the process table on the dashboard
	ScopeLogs         Scope = "guest:logs"           // /logs/<name>, when public_logs
	ScopeMetrics      Scope = "guest:metrics"        // /metrics and the sysinfo block, when public_sysinfo
)

// AllScopes lists every known scope, in the seed's order.
var AllScopes = []Scope{ScopeVersion, ScopeHealth, ScopeInfo, ScopeAttestAppKey,
	ScopeDashboard, ScopeContainers, ScopeLogs, ScopeMetrics}

// ParseScope returns the scope named s, or an error naming it when unknown.
func ParseScope(s string) (Scope, error) {
	for _, k := range AllScopes {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown scope %q", s)
}

// Scopes is a set of granted scopes.
type Scopes map[Scope]bool

// ParseScopeList parses config or CLI scope names; any unknown name is an
// error naming it (an unknown name must never be a permission that silently
// never matches).
func ParseScopeList(names []string) (Scopes, error) {
	out := Scopes{}
	for _, n := range names {
		s, err := ParseScope(n)
		if err != nil {
			return nil, err
		}
		out[s] = true
	}
	return out, nil
}

// Has reports whether s is granted.
func (ss Scopes) Has(s Scope) bool { return ss[s] }

// Union returns a new set with the scopes of both.
func (ss Scopes) Union(o Scopes) Scopes {
	out := make(Scopes, len(ss)+len(o))
	for s := range ss {
		out[s] = true
	}
	for s := range o {
		out[s] = true
	}
	return out
}

// String is the space-separated form used in the token's scope claim.
func (ss Scopes) String() string {
	names := make([]string, 0, len(ss))
	for s := range ss {
		names = append(names, string(s))
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}
