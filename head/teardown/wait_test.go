package teardown

import (
	"context"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestDownLeavesDestroysToHead: a running head that destroys its rentals
// itself (one at a time, as vast's limit allows) is left to it: head down
// sends no destroy of its own, and still waits until none is listed.
func TestDownLeavesDestroysToHead(t *testing.T) {
	dir := t.TempDir()
	reg, adm := newAdmin(t)
	serveAdmin(t, dir, adm.Handler())
	if _, _, err := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu"}); err != nil {
		t.Fatal(err)
	}
	rs := &listRentals{live: map[string]bool{"11": true, "12": true, "13": true}}
	stop := make(chan struct{})
	go func() { // the head: one destroy every 3 polls
		for _, id := range []string{"11", "12", "13"} {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			rs.mu.Lock()
			delete(rs.live, id)
			rs.mu.Unlock()
		}
	}()
	defer close(stop)
	rep, err := Down(context.Background(), Config{StateDir: dir, Rentals: rs, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.destroyed) != 0 || len(rep.Destroyed) != 0 {
		t.Errorf("head down destroyed %v itself while the head was destroying them", rs.destroyed)
	}
	if rs.live["11"] || rs.live["12"] || rs.live["13"] {
		t.Errorf("down returned with rentals listed: %v", rs.live)
	}
}
