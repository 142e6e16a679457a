package raylife

import "time"

// holdForHead bounds how long a Ray ended because its Ray head is gone
// waits for the head to name a new one before it starts anyway.
const holdForHead = 2 * time.Minute

// headState is which Ray head Ray follows; guarded by Ray.mu.
type headState struct {
	id      string        // the Ray head Ray joined ("" unknown)
	down    bool          // the head stopped naming id; the next one named is Ray's
	back    chan struct{} // a Ray head is named again after down
	cycling string        // why the agent itself is ending Ray to restart it ("" not)
	kick    chan struct{} // cuts a restart backoff short
}

// RayHead is what the head's heartbeat answer says of the Ray head (""
// when it names none), and whether the next heartbeat should come soon.
//
// The first Ray head named is the one Ray joined. When the head stops
// naming it (it died; a new one is starting), Ray's cluster is gone: Ray is
// restarted at once, so that its `ray start` waits for the new GCS instead
// of Ray's raylet waiting 60 s for the old one, and heartbeats come soon
// until a Ray head is named again, which is then taken as the one Ray
// joins. A Ray head named with another ID (the whole change happened
// between two heartbeats) restarts Ray the same way.
func (r *Ray) RayHead(id string) (soon bool) {
	r.mu.Lock()
	prev, why := r.head.id, ""
	switch {
	case id == "" && prev != "":
		r.head.id, r.head.down = "", true
		why = "the Ray head is gone (" + prev + ")"
	case id == "":
	case prev == "":
		if r.head.down {
			select {
			case r.head.back <- struct{}{}:
			default:
			}
		}
		r.head.id, r.head.down = id, false
	case prev != id:
		r.head.id = id
		why = "the Ray head restarted (now " + id + ")"
	}
	cycle := why != "" && r.head.cycling == ""
	if cycle {
		r.head.cycling = why
	}
	soon = r.head.down
	r.mu.Unlock()
	if !cycle {
		return soon
	}
	r.log.Warn("restarting ray now", "why", why)
	select {
	case r.head.kick <- struct{}{}: // cuts a restart backoff short
	default:
	}
	r.sup.Cycle(0) // nothing to drain: its GCS is gone
	return soon
}

// waitForHead holds a restart while the head names no Ray head, up to
// holdForHead; false when a stop came meanwhile.
//
// Ray's start would wait for the new Ray head anyway (Ray 2.60's `ray
// start` waits for the head's raylet); starting it now only takes CPU
// from the Ray head where they share a machine.
func (r *Ray) waitForHead() bool {
	r.mu.Lock()
	hold := r.head.down
	r.mu.Unlock()
	if !hold {
		return true
	}
	t := time.NewTimer(holdForHead)
	defer t.Stop()
	select {
	case <-r.head.back:
	case <-t.C:
	case <-r.sup.Stopping():
		return false
	}
	return true
}
