package nodeview

import (
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

func fixture() ([]wire.Candidate, []wire.Node) {
	cands := []wire.Candidate{
		{CandidateID: "c-aa11", InstanceID: "9001", State: wire.StateEnrolled},
		{CandidateID: "c-aa22", InstanceID: "9002", State: wire.StateEnded, Reason: wire.ReasonGPUCount},
		{CandidateID: "c-bb33", State: wire.StatePending},
	}
	nodes := []wire.Node{{InstanceID: "9001", CandidateID: "c-aa11", State: wire.StateEnrolled}}
	return cands, nodes
}

// TestResolve proves NODE names an instance or candidate ID, exactly or by
// a unique prefix, and that unknown and ambiguous names say what matched.
func TestResolve(t *testing.T) {
	cands, nodes := fixture()
	for _, c := range []struct{ name, want, err string }{
		{"9001", "9001", ""},
		{"c-aa11", "9001", ""},
		{"c-aa2", "9002", ""},
		{"c-bb", "c-bb33", ""},
		{"900", "", `"900" matches 2: candidate c-aa11 (instance 9001), candidate c-aa22 (instance 9002)`},
		{"c-aa", "", "matches 2"},
		{"zzz", "", `no candidate or node matches "zzz" (3 candidates, 1 nodes`},
		{"", "", "empty"},
	} {
		m, err := Resolve(cands, nodes, c.name)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Resolve(%q) error = %v, want it to contain %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", c.name, err)
			continue
		}
		if got := m.ID(); got != c.want {
			t.Errorf("Resolve(%q) = %s, want %s", c.name, got, c.want)
		}
	}
	m, _ := Resolve(cands, nodes, "9001")
	if m.Node == nil || m.Candidate == nil {
		t.Errorf("enrolled match lacks its node or candidate: %+v", m)
	}
}

// TestResolveExactBeatsPrefix: an ID that is also a prefix of another names
// itself.
func TestResolveExactBeatsPrefix(t *testing.T) {
	cands := []wire.Candidate{{CandidateID: "c1", InstanceID: "77"}, {CandidateID: "c2", InstanceID: "770"}}
	m, err := Resolve(cands, nil, "77")
	if err != nil || m.Candidate.CandidateID != "c1" {
		t.Fatalf("Resolve(77) = %+v, %v; want c1", m, err)
	}
}

func TestLastLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc\n"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, "a\nb\nc\n"},
		{"", 3, ""},
	} {
		if got := string(LastLines([]byte(c.in), c.n)); got != c.want {
			t.Errorf("LastLines(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestNewSince(t *testing.T) {
	long := strings.Repeat("line of a long log\n", 400)
	for _, c := range []struct{ prev, cur, want string }{
		{"", "a\n", "a\n"},
		{"a\n", "a\na\n", "a\n"},            // repeated lines: the prefix rule, not a search
		{"x\n" + long, long + "z\n", "z\n"}, // the window slid past x
		{"x\ny\n", "other\n", "other\n"},    // replaced log
		{"a\nb\n", "a\nb\n", ""},            // nothing new
	} {
		if got := string(NewSince([]byte(c.prev), []byte(c.cur))); got != c.want {
			t.Errorf("NewSince(%q, %q) = %q, want %q", c.prev, c.cur, got, c.want)
		}
	}
}

// TestStoryOfARejectedHost proves `head node` tells what a rejected
// candidate's agent reported (the failed check with its detail, GPUs,
// versions), and that a hostile detail reaches the terminal inert.
func TestStoryOfARejectedHost(t *testing.T) {
	c := wire.Candidate{CandidateID: "c-rej1", InstanceID: "9100", State: wire.StateEnded, Reason: wire.ReasonSecurityCheck,
		Reported: &wire.CheckReport{
			Checks: wire.Checks{Capabilities: wire.Check{OK: true}, Netns: wire.Check{OK: true},
				Shm:    wire.Check{OK: false, Detail: "shared with the host\x1b[2J"},
				Egress: wire.EgressCheck{OK: true, IP: "203.0.113.7"}},
			GPUs: 1, GPUModels: []string{"NVIDIA A100-SXM4-80GB"}, RayVersion: "2.53.0", PythonVersion: "3.11.7"}}
	var b strings.Builder
	Story{Match: Match{Candidate: &c}}.Print(&b)
	out := b.String()
	for _, want := range []string{"never enrolled", "by its agent at enrollment",
		"shm FAILED (shared with the host", "egress ok", "1: NVIDIA A100-SXM4-80GB", "2.53.0 / 3.11.7"} {
		if !strings.Contains(out, want) {
			t.Errorf("story lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape sequence from the host reached the terminal:\n%q", out)
	}
}

// TestStoryShowsRayReport proves `head node` shows the node's last Ray
// report (Ray's last words when it did not join), made inert: the words
// came from the node.
func TestStoryShowsRayReport(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	n := wire.Node{InstanceID: "i-1", State: wire.StateEnrolled, Ray: wire.RayStatus{State: wire.RayStarting},
		RayReport: &wire.RayReport{Event: wire.EventRayNotJoined, Detail: "not joined after 2m0s; Ray's last words: GCS unreachable\x1b[2J", At: now.Add(-time.Minute)}}
	var b strings.Builder
	Story{Match: Match{Node: &n}, Now: now}.Print(&b)
	out := b.String()
	if !strings.Contains(out, "last ray report") || !strings.Contains(out, "ray_not_joined, 2026-11-30T11:59:00Z (1m0s ago): not joined after 2m0s; Ray's last words: GCS unreachable") {
		t.Errorf("story lacks the Ray report:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape sequence from the node reached the terminal:\n%q", out)
	}
}

// TestStoryShowsSelfEnd: `head node` says when a node ends its own rental
// if the head stays silent: its limit counted from its last heartbeat, and
// "never" for a node whose bundle named no limit.
func TestStoryShowsSelfEnd(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	last := now.Add(-10 * time.Minute)
	n := wire.Node{InstanceID: "i-1", State: wire.StateEnrolled, EnrolledAt: now.Add(-time.Hour), LastHeartbeat: &last, UnheardLimitS: 1800}
	var b strings.Builder
	Story{Match: Match{Node: &n}, Now: now}.Print(&b)
	if want := "after 30m0s unheard: at 2026-11-30T12:20:00Z (in 20m0s) if the head stays silent"; !strings.Contains(b.String(), want) {
		t.Errorf("story lacks %q:\n%s", want, b.String())
	}
	n.UnheardLimitS = 0
	b.Reset()
	Story{Match: Match{Node: &n}, Now: now}.Print(&b)
	if !strings.Contains(b.String(), "ends itself     never") {
		t.Errorf("story of a node without a limit:\n%s", b.String())
	}
}
