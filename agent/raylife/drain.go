package raylife

import (
	"context"
	"fmt"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// askBound bounds the heartbeat the agent sends when Ray exits on its own,
// before it decides on a restart: an away head delays a restart this long
// at most.
const askBound = 10 * time.Second

// drainState is whether the head drains this node before ending it (its
// heartbeat answer's drain notice); guarded by Ray.mu.
type drainState struct {
	on       bool
	deadline time.Time
	lifted   chan struct{} // a later answer no longer names the drain
}

// Drain is what the head's heartbeat answer says of a drain of this node
// (nil: none), heard on every answer.
//
// Once the head drains the node (a planned end: `head down`, a contract's
// end), Ray that exits is not started again: a drained raylet exits once
// idle, and the head ends the rental once Ray shows the node drained; a
// Ray started anew until then could take new work there. A later answer
// that no longer names the drain (the head dropped it) lets a held Ray
// start again.
func (r *Ray) Drain(d *wire.DrainNotice) {
	r.mu.Lock()
	was := r.drain.on
	r.drain.on = d != nil
	if d != nil {
		r.drain.deadline = d.Deadline
		select { // an older lift is stale now
		case <-r.drain.lifted:
		default:
		}
	}
	r.mu.Unlock()
	switch {
	case d != nil && !was:
		r.log.Info("the head drains this node before ending it: Ray is not started again once it exits", "deadline", d.Deadline)
	case d == nil && was:
		r.log.Info("the head no longer drains this node: Ray may start again")
		select {
		case r.drain.lifted <- struct{}{}:
		default:
		}
	}
}

// askHead, when Ray exited on its own, sends a heartbeat at once and waits
// for its answer (up to askBound), so that a drain the head began since
// the last heartbeat is known before any restart: a drained raylet exits
// within a second of an idle node's drain, long before the next beat.
func (r *Ray) askHead() {
	if r.beat == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), askBound)
	defer cancel()
	r.beat(ctx)
}

// draining reports whether the head drains this node.
func (r *Ray) draining() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drain.on
}

// heldAfterDrain keeps Ray, which exited with code, down while the head
// drains the node: until a stop or a signal (stoppedIdle; the head ends
// the rental meanwhile), or until an answer no longer names the drain,
// when Ray starts again.
func (r *Ray) heldAfterDrain(code int) restartOutcome {
	r.mu.Lock()
	deadline := r.drain.deadline
	r.mu.Unlock()
	r.log.Info("ray exited after the head drained this node: not starting it again; the head ends this node",
		"exit_code", code, "deadline", deadline)
	r.report(wire.EventRayExited, fmt.Sprintf("exit code %d; not started again: the head drains this node (deadline %s)",
		code, deadline.UTC().Format(time.RFC3339)))
	select {
	case <-r.drain.lifted:
	case <-r.sup.Stopping():
		return stoppedIdle
	}
	if out, done := r.startAgain("the head no longer drains this node"); done {
		return out
	}
	return r.restartAfterBackoff(code)
}
