package registry

import (
	"fmt"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// enrolled makes inst a node of node type gpu1 and returns its candidate.
func enrolled(t *testing.T, r *Registry, inst, ip string) wire.Candidate {
	t.Helper()
	c, tok := running(t, r, inst, ip)
	cl, err := r.Claim(inst, ip, tok, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TakeSlot(cl, 1<<20) {
		t.Fatal("no slot")
	}
	if _, err := r.Complete(cl, Enrolled{Serial: "s-" + inst}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSlotsFreedOnlyByEnd: an enrolled or lost node holds its slot (its
// instance may still run Ray); a destroy request alone does not free it; an
// ended node does.
func TestSlotsFreedOnlyByEnd(t *testing.T) {
	clk := newClock()
	r := open(t, "", clk)
	a := enrolled(t, r, "a", "127.0.0.5")
	try := func(n int) bool {
		inst := fmt.Sprintf("try%d", n)
		ip := fmt.Sprintf("127.0.1.%d", n)
		c, tok := running(t, r, inst, ip)
		cl, err := r.Claim(inst, ip, tok, testKey)
		if err != nil {
			t.Fatal(err)
		}
		defer r.End(c.CandidateID, "test")
		defer r.Release(cl)
		return r.TakeSlot(cl, 1)
	}
	if try(1) {
		t.Error("a slot of 1 taken twice while a node is enrolled")
	}
	clk.Add(time.Hour)
	if lost, _ := r.SweepLost(time.Second); len(lost) != 1 {
		t.Fatalf("lost %v", lost)
	}
	if try(2) {
		t.Error("a lost node's slot was given away before it ended")
	}
	r.RequestDestroy(a.CandidateID, "lost")
	if try(3) {
		t.Error("a destroy_requested node's slot was given away before it ended")
	}
	r.End(a.CandidateID, "deleted")
	if !try(4) {
		t.Error("an ended node still holds its slot")
	}
}

// TestReenrolledInstanceOldSerialDies: an instance that enrolls again
// through a new candidate has one node, with the new serial; ending the old
// candidate does not end the new node.
func TestReenrolledInstanceOldSerialDies(t *testing.T) {
	r := open(t, "", newClock())
	old := enrolled(t, r, "x", "127.0.0.5")
	r.RequestDestroy(old.CandidateID, "lost")
	c, tok, err := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: "x", PublicIP: "127.0.0.5"})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := r.Claim("x", "127.0.0.5", tok, testKey)
	if err != nil {
		t.Fatal(err)
	}
	r.Complete(cl, Enrolled{Serial: "new"})
	r.End(old.CandidateID, "deleted")
	n, ok := r.Live("x")
	if !ok || n.Serial != "new" || n.CandidateID != c.CandidateID {
		t.Errorf("node after re-enrollment: %+v live=%v, want serial new of %s", n, ok, c.CandidateID)
	}
}
