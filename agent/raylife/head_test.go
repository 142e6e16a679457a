package raylife

import (
	"strings"
	"testing"
)

// TestRayHeadChangeRestartsRay proves the first Ray head the head names
// is taken as the one Ray joined and naming it again changes nothing; when
// the head stops naming it (it died) Ray is ended at once and heartbeats
// come soon until a Ray head is named again, which releases Ray's held
// start and is taken as the one it joins (no second restart); a new ID
// named outright restarts Ray too. A restart is a cycle of Ray with a kick
// that cuts a backoff short.
func TestRayHeadChangeRestartsRay(t *testing.T) {
	lt := newRayUnderTest(t, 0)
	lt.launchPID(t, 41)
	step := func(id string, wantSoon bool, wantCycle string) {
		t.Helper()
		kicks := len(lt.head.kick)
		soon := lt.RayHead(id)
		lt.Ray.mu.Lock()
		cycling := lt.head.cycling
		lt.Ray.mu.Unlock()
		if soon != wantSoon || !strings.Contains(cycling, wantCycle) || (wantCycle == "") != (cycling == "") {
			t.Fatalf("RayHead(%q): soon %v, cycling %q; want soon %v, cycling %q", id, soon, cycling, wantSoon, wantCycle)
		}
		if wantCycle != "" && len(lt.head.kick) == 0 && kicks == 0 {
			t.Fatalf("RayHead(%q): restart without a kick", id)
		}
	}
	step("", false, "") // the head runs no Ray head, or it is not up yet
	step("aaaa", false, "")
	step("aaaa", false, "")
	step("", true, "the Ray head is gone (aaaa)")
	step("", true, "the Ray head is gone (aaaa)") // still restarting: no second cycle
	if len(lt.head.back) != 0 {
		t.Fatal("a Ray head named back before any was")
	}
	step("bbbb", false, "the Ray head is gone (aaaa)") // the new one: Ray's, no second restart
	if len(lt.head.back) != 1 {
		t.Fatal("the new Ray head did not release the held restart")
	}
	lt.launchPID(t, 42) // the held restart, toward bbbb
	step("bbbb", false, "")
	step("cccc", false, "the Ray head restarted (now cccc)")
}
