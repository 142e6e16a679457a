package guestauth

// Switches are the app's measured switches (docs/protocol.md §9): fixed at launch, part
// of what the app id stands for, and AND-ed with every scope.
type Switches struct {
	PublicLogs    bool
	PublicSysinfo bool
	PublicTCBInfo bool
}

// On reports whether sw is on; SwitchNone is always on.
func (s Switches) On(sw Switch) bool {
	switch sw {
	case SwitchNone:
		return true
	case SwitchLogs:
		return s.PublicLogs
	case SwitchSysinfo:
		return s.PublicSysinfo
	case SwitchTCBInfo:
		return s.PublicTCBInfo
	}
	return false
}

// Verdict is the outcome of judging one request.
type Verdict int

const (
	// Allow: route it.
	Allow Verdict = iota
	// Unauthorized: 401 with WWW-Authenticate: Bearer. Every path the table
	// does not name, and every named path whose scope the caller lacks.
	Unauthorized
	// NotMounted: 404. The caller holds the scope but the app's measured
	// switch keeps the route unmounted. Only callers who already hold the
	// scope can tell this from 401, so a stranger learns nothing about the
	// switches (which Info reports to guest:info holders anyway).
	NotMounted
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case Unauthorized:
		return "unauthorized"
	case NotMounted:
		return "not_mounted"
	}
	return "invalid"
}

// Decide is the whole access decision: the table first (fail closed), the
// scope gate second, the measured switch third. Local-only rows exist only
// on the Unix socket (Lookup enforces that) and need no scope there.
func Decide(r Route, found bool, granted Scopes, sw Switches) Verdict {
	if !found {
		return Unauthorized
	}
	if !r.Local && (r.Scope == "" || !granted.Has(r.Scope)) {
		return Unauthorized
	}
	if !sw.On(r.Switch) {
		return NotMounted
	}
	return Allow
}

// Block is one block of the dashboard.
type Block string

const (
	BlockIdentity  Block = "identity"  // guest:info; the tcb part also needs public_tcbinfo
	BlockProcesses Block = "processes" // guest:containers
	BlockLogs      Block = "logs"      // guest:logs AND public_logs
	BlockSysinfo   Block = "sysinfo"   // guest:metrics AND public_sysinfo
	BlockGPUs      Block = "gpus"      // as sysinfo: guest:metrics AND public_sysinfo
)

// Visible reports whether a dashboard block may be rendered (and so whether
// its data may be computed at all) for a caller holding granted.
func Visible(b Block, granted Scopes, sw Switches) bool {
	switch b {
	case BlockIdentity:
		return granted.Has(ScopeInfo)
	case BlockProcesses:
		return granted.Has(ScopeContainers)
	case BlockLogs:
		return granted.Has(ScopeLogs) && sw.PublicLogs
	case BlockSysinfo, BlockGPUs:
		return granted.Has(ScopeMetrics) && sw.PublicSysinfo
	}
	return false
}
