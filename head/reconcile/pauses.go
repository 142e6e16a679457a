package reconcile

import "sync"

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
