package registry

import "github.com/rayvast/rayvast/internal/wire"

// A change runs in three parts: under mu, wait for the candidate's earlier
// write (begin) and compute the new records as copies; write them with mu
// released (commit), so reads and heartbeats never wait on a disk; under mu
// again, put the copies in place only if the write succeeded, and end.

// begin waits until no write of candidate id is in flight and marks one.
// Caller holds mu; it is released while waiting, so look the candidate up
// after begin returns.
func (r *Registry) begin(id string) {
	for {
		ch, busy := r.writing[id]
		if !busy {
			r.writing[id] = make(chan struct{})
			return
		}
		r.mu.Unlock()
		<-ch
		r.mu.Lock()
	}
}

// end marks candidate id's write finished. Caller holds mu.
func (r *Registry) end(id string) {
	if ch, ok := r.writing[id]; ok {
		close(ch)
		delete(r.writing, id)
	}
}

// commit writes f's records for change op with mu released; caller holds
// mu before and after. f sees only copies made under mu. The crash tests
// stop the head at op's hook points either side of the write.
func (r *Registry) commit(op string, f func(w writer) error) error {
	r.mu.Unlock()
	defer r.mu.Lock()
	r.hook(op + ":before-write")
	if r.store == nil {
		return nil
	}
	if err := r.store.write(f); err != nil {
		return err
	}
	r.hook(op + ":after-write")
	return nil
}

func (r *Registry) hook(point string) {
	if r.cfg.Hook != nil {
		r.cfg.Hook(point)
	}
}

// setCandidate puts a committed candidate in place and keeps the instance
// index in step. Caller holds mu.
func (r *Registry) setCandidate(c *candidate) {
	r.candidates[c.CandidateID] = c
	if c.InstanceID == "" {
		return
	}
	if wire.Live(c.State) {
		r.byInstance[c.InstanceID] = c.CandidateID
	} else if r.byInstance[c.InstanceID] == c.CandidateID {
		delete(r.byInstance, c.InstanceID)
	}
	if !wire.Live(c.State) {
		delete(r.resumable, c.CandidateID)
	}
}

// setNode puts a committed node in place, keeping what heartbeats recorded
// in memory while the write ran. Caller holds mu.
func (r *Registry) setNode(n *wire.Node) {
	if o := r.nodes[n.InstanceID]; o != nil && o.CandidateID == n.CandidateID {
		n.LastHeartbeat, n.Seq, n.Ray = o.LastHeartbeat, o.Seq, o.Ray
		n.Health, n.HealthFailures = o.Health, o.HealthFailures
	}
	r.nodes[n.InstanceID] = n
}
