package registry

import (
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// Prune drops candidates ended more than retention ago, with their ended
// node and its serials, from memory and the store, and returns how many
// candidates went. The count is kept (Pruned) for /metrics.
func (r *Registry) Prune(retention time.Duration) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := r.cfg.Now().Add(-retention)
	var ids []string
	nodes := map[string]bool{}
	for id, c := range r.candidates {
		if c.State != wire.StateEnded || !c.UpdatedAt.Before(cut) {
			continue
		}
		if _, busy := r.writing[id]; busy {
			continue
		}
		r.writing[id] = make(chan struct{})
		ids = append(ids, id)
		if n := r.nodes[c.InstanceID]; n != nil && n.CandidateID == id {
			nodes[c.InstanceID] = true
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	defer func() {
		for _, id := range ids {
			r.end(id)
		}
	}()
	var serials []IssuedSerial
	for _, s := range r.serials {
		if nodes[s.InstanceID] {
			serials = append(serials, s)
		}
	}
	err := r.commit("prune", func(w writer) error {
		for _, id := range ids {
			if err := w.deleteCandidate(id); err != nil {
				return err
			}
		}
		for inst := range nodes {
			if err := w.deleteNode(inst); err != nil {
				return err
			}
		}
		for _, s := range serials {
			if err := w.deleteSerial(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		delete(r.candidates, id)
	}
	for inst := range nodes {
		if n := r.nodes[inst]; n != nil && n.State == wire.StateEnded {
			delete(r.nodes, inst)
			delete(r.lastSeen, inst)
		}
	}
	kept := r.serials[:0]
	for _, s := range r.serials {
		if !nodes[s.InstanceID] || r.nodes[s.InstanceID] != nil {
			kept = append(kept, s)
		}
	}
	r.serials = kept
	r.pruned += int64(len(ids))
	return len(ids), nil
}

// Pruned is how many ended candidates Prune dropped since Open.
func (r *Registry) Pruned() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pruned
}
