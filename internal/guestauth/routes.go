package guestauth

import "strings"

// Kind is what a route serves; the server dispatches on it.
type Kind string

const (
	KindDashboard Kind = "dashboard" // GET /
	KindPRPC      Kind = "prpc"      // /prpc[/v0|/v1]/[Worker.]<Method>
	KindLogs      Kind = "logs"      // GET /logs/<name>
	KindMetrics   Kind = "metrics"   // GET /metrics
)

// Switch names a measured switch of the app file that gates a route or block.
type Switch string

const (
	SwitchNone       Switch = ""
	SwitchLogs       Switch = "public_logs"
	SwitchSysinfo    Switch = "public_sysinfo"
	SwitchTCBInfo    Switch = "public_tcbinfo"
	SurfaceV0               = "v0"
	SurfaceV1               = "v1"
	workerPrefix            = "Worker."
	maxMethodNameLen        = 64
)

// Row is one entry of the route table.
type Row struct {
	Kind    Kind
	Surface string // pRPC surface: "v0" or "v1"
	Name    string // pRPC method (without "Worker.") or log name
	Scope   Scope  // the scope a caller needs; "" on local-only rows
	Switch  Switch // the measured switch that must also be on, if any
	Local   bool   // served only on the unauthenticated Unix socket
}

// Table is the whole route→scope table. A path that matches no row is
// answered 401 and never reaches a handler. /prpc and /prpc/v0 are the same
// v0 surface.
var Table = []Row{
	{Kind: KindDashboard, Scope: ScopeDashboard},
	{Kind: KindPRPC, Surface: SurfaceV0, Name: "Version", Scope: ScopeVersion},
	{Kind: KindPRPC, Surface: SurfaceV0, Name: "Info", Scope: ScopeInfo},
	{Kind: KindPRPC, Surface: SurfaceV0, Name: "GetAttestationForAppKey", Scope: ScopeAttestAppKey},
	{Kind: KindPRPC, Surface: SurfaceV1, Name: "Version", Scope: ScopeVersion},
	{Kind: KindPRPC, Surface: SurfaceV1, Name: "Health", Scope: ScopeHealth},
	{Kind: KindPRPC, Surface: SurfaceV1, Name: "Info", Scope: ScopeInfo},
	{Kind: KindLogs, Name: "agent", Scope: ScopeLogs, Switch: SwitchLogs},
	{Kind: KindLogs, Name: "ray", Scope: ScopeLogs, Switch: SwitchLogs},
	{Kind: KindMetrics, Scope: ScopeMetrics, Switch: SwitchSysinfo},
	{Kind: KindPRPC, Surface: SurfaceV0, Name: "GetKey", Local: true},
}

// Route is a request matched against the table: the row plus the canonical
// path that was judged. Handlers take everything they need from here.
type Route struct {
	Row
	Path string // canonical path
}

// Lookup canonicalises an escaped path and finds its row. local selects the
// Unix-socket surface, where local-only rows exist too. ok is false for any
// path the table does not name.
func Lookup(escaped string, local bool) (r Route, ok bool) {
	p, err := Canonical(escaped)
	if err != nil {
		return Route{}, false
	}
	key, ok := rowKey(p)
	if !ok {
		return Route{}, false
	}
	for _, row := range Table {
		if row.Kind == key.Kind && row.Surface == key.Surface && row.Name == key.Name && (!row.Local || local) {
			return Route{Row: row, Path: p}, true
		}
	}
	return Route{}, false
}

// rowKey splits a canonical path into the (kind, surface, name) a row matches.
func rowKey(p string) (Row, bool) {
	if p == "/" {
		return Row{Kind: KindDashboard}, true
	}
	segs := strings.Split(p[1:], "/")
	switch {
	case len(segs) == 1 && segs[0] == "metrics":
		return Row{Kind: KindMetrics}, true
	case len(segs) == 2 && segs[0] == "logs":
		return Row{Kind: KindLogs, Name: segs[1]}, true
	case len(segs) == 2 && segs[0] == "prpc":
		return prpcKey(SurfaceV0, segs[1])
	case len(segs) == 3 && segs[0] == "prpc" && (segs[1] == SurfaceV0 || segs[1] == SurfaceV1):
		return prpcKey(segs[1], segs[2])
	}
	return Row{}, false
}

func prpcKey(surface, method string) (Row, bool) {
	method = strings.TrimPrefix(method, workerPrefix)
	if method == "" || len(method) > maxMethodNameLen {
		return Row{}, false
	}
	return Row{Kind: KindPRPC, Surface: surface, Name: method}, true
}
