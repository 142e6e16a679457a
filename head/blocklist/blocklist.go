// Package blocklist is the head's in-memory list of provider hosts not to
// rent from (seed 000: security 30 days, network 1 day). It is lost when the
// head stops, by design.
package blocklist

import (
	"sort"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// How long each class keeps a host out.
const (
	SecurityFor = 30 * 24 * time.Hour
	NetworkFor  = 24 * time.Hour
)

// List is safe for concurrent use.
type List struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]wire.BlockEntry // by host ID
}

// New returns an empty list reading time from now (nil = time.Now).
func New(now func() time.Time) *List {
	if now == nil {
		now = time.Now
	}
	return &List{now: now, m: make(map[string]wire.BlockEntry)}
}

// strength orders classes; an unknown class counts as security, the safe
// side of a programming error.
func strength(class string) int {
	if class == wire.BlockNetwork {
		return 1
	}
	return 2
}

func duration(class string) time.Duration {
	if class == wire.BlockNetwork {
		return NetworkFor
	}
	return SecurityFor
}

// Add blocks hostID for its class's time from now and returns the entry now
// in force. A host already listed keeps the later expiry and the stronger
// class (with that class's reason). An empty hostID is a no-op: a provider
// that does not know the host cannot have it blocked.
func (l *List) Add(hostID, class, reason string) wire.BlockEntry {
	if class != wire.BlockNetwork {
		class = wire.BlockSecurity
	}
	now := l.now()
	e := wire.BlockEntry{HostID: hostID, Class: class, Reason: reason, Until: now.Add(duration(class)).UTC()}
	if hostID == "" {
		return e
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneLocked(now)
	if old, ok := l.m[hostID]; ok {
		if strength(old.Class) > strength(e.Class) {
			e.Class, e.Reason = old.Class, old.Reason
		}
		if old.Until.After(e.Until) {
			e.Until = old.Until
		}
	}
	l.m[hostID] = e
	return e
}

// Blocked returns hostID's entry if it has not expired.
func (l *List) Blocked(hostID string) (wire.BlockEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneLocked(l.now())
	e, ok := l.m[hostID]
	return e, ok
}

// Entries returns the unexpired entries sorted by host ID.
func (l *List) Entries() []wire.BlockEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pruneLocked(l.now())
	out := make([]wire.BlockEntry, 0, len(l.m))
	for _, e := range l.m {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].HostID < out[j].HostID })
	return out
}

// pruneLocked drops entries whose time is up; an entry expires at Until.
func (l *List) pruneLocked(now time.Time) {
	for id, e := range l.m {
		if !now.Before(e.Until) {
			delete(l.m, id)
		}
	}
}
