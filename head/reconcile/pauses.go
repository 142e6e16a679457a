package reconcile

import (
	"sync"
	"time"
)

// Pauses holds the node types whose renting is paused (too many failed
// candidates). The loop sets it; with Ray's autoscaler owning the count
// the admin API reads it too and refuses new candidates of a paused type,
// so a systematic failure (a wrong image) does not rent forever at Ray's
// request either.
type Pauses struct {
	mu sync.Mutex
	m  map[string]bool
}

// Paused reports whether renting of node type n is paused. A nil Pauses
// pauses nothing.
func (p *Pauses) Paused(n string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[n]
}

func (p *Pauses) set(n string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]bool{}
	}
	if on {
		p.m[n] = true
	} else {
		delete(p.m, n)
	}
}

// Drains holds the nodes the loop drains before a planned end, by instance
// ID, with each drain's deadline: the loop sets it, port B reads it and
// tells each node in its heartbeat answers (wire.DrainNotice), so that the
// node's agent does not start Ray again once the drained Ray exits.
type Drains struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// Of reports whether the node with instance ID id is being drained, and
// its deadline. A nil Drains drains nothing.
func (d *Drains) Of(id string) (deadline time.Time, ok bool) {
	if d == nil || id == "" {
		return time.Time{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	deadline, ok = d.m[id]
	return deadline, ok
}

func (d *Drains) set(id string, deadline time.Time, on bool) {
	if d == nil || id == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]time.Time{}
	}
	if on {
		d.m[id] = deadline
	} else {
		delete(d.m, id)
	}
}
