package main

import (
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/supervise"
	"github.com/rayvast/rayvast/internal/wire"
)

// loopUnderTest is a rayLoop whose starts are recorded, not run: one
// Supervisor per process may reap, so these tests drive the loop's
// bookkeeping only (test/agentflow and test/e2e run it for real).
type loopUnderTest struct {
	*rayLoop
	mu      sync.Mutex
	joined  []func() // per start, what Ray's output watcher would call
	reports []wire.Report
	got     chan wire.Report
}

func newLoopUnderTest(t *testing.T) *loopUnderTest {
	t.Helper()
	lt := &loopUnderTest{got: make(chan wire.Report, 16)}
	lt.rayLoop = newRayLoop(supervise.New(supervise.Config{}), supervise.DefaultRestartPolicy(),
		func(joined func()) (*exec.Cmd, func(), error) {
			lt.mu.Lock()
			lt.joined = append(lt.joined, joined)
			lt.mu.Unlock()
			return exec.Command("true"), func() {}, nil
		},
		func(event, detail string) { lt.got <- wire.Report{Event: event, Detail: detail} },
		func() string { return "Error: GCS at 10.0.0.1:6379 unreachable" },
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	return lt
}

func (lt *loopUnderTest) launchPID(t *testing.T, pid int) {
	t.Helper()
	if err := lt.launch(func(*exec.Cmd) (int, error) { return pid, nil }); err != nil {
		t.Fatal(err)
	}
}

func (lt *loopUnderTest) joinedOf(i int) func() {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.joined[i]
}

// TestRayStartingUntilJoined proves a node's Ray is reported starting from
// each start until Ray says its node joined the cluster, then running; a
// late "joined" of an earlier start does not make the next one running.
func TestRayStartingUntilJoined(t *testing.T) {
	lt := newLoopUnderTest(t)
	lt.launchPID(t, 41)
	if st := lt.Status(); st.State != wire.RayStarting || st.PID != 41 {
		t.Fatalf("after start: %+v, want starting pid 41", st)
	}
	lt.joinedOf(0)()
	if st := lt.Status(); st.State != wire.RayRunning {
		t.Fatalf("after Ray said it started: %+v, want running", st)
	}
	lt.launchPID(t, 42) // a restart
	if st := lt.Status(); st.State != wire.RayStarting || st.PID != 42 {
		t.Fatalf("after restart: %+v, want starting pid 42", st)
	}
	lt.joinedOf(0)() // the first Ray's output, late
	if st := lt.Status(); st.State != wire.RayStarting {
		t.Errorf("an earlier start's line made the restart %s, want starting", st.State)
	}
	lt.joinedOf(1)()
	if st := lt.Status(); st.State != wire.RayRunning || st.PID != 42 {
		t.Errorf("after the restart joined: %+v, want running pid 42", st)
	}
}

// TestRayNotJoinedReported proves a Ray that has not joined within the
// bound is reported ray_not_joined with Ray's last words, and one that
// joined in time is not.
func TestRayNotJoinedReported(t *testing.T) {
	lt := newLoopUnderTest(t)
	lt.joinTimeout = 50 * time.Millisecond
	lt.launchPID(t, 41)
	select {
	case r := <-lt.got:
		if r.Event != wire.EventRayNotJoined || !strings.Contains(r.Detail, "GCS at 10.0.0.1:6379 unreachable") {
			t.Errorf("report %+v, want ray_not_joined with Ray's last words", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no ray_not_joined report")
	}
	if st := lt.Status(); st.State != wire.RayStarting {
		t.Errorf("state %s after the bound, want still starting (not running)", st.State)
	}

	lt2 := newLoopUnderTest(t)
	lt2.joinTimeout = 50 * time.Millisecond
	lt2.launchPID(t, 43)
	lt2.joinedOf(0)()
	select {
	case r := <-lt2.got:
		t.Errorf("a Ray that joined got report %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestRayHeadChangeRestartsRay proves the first Ray head the head names
// is taken as the one Ray joined and naming it again changes nothing; when
// the head stops naming it (it died) Ray is ended at once and heartbeats
// come soon until a Ray head is named again, which releases Ray's held
// start and is taken as the one it joins (no second restart); a new ID
// named outright restarts Ray too. A restart is a cycle of Ray with a kick
// that cuts a backoff short.
func TestRayHeadChangeRestartsRay(t *testing.T) {
	lt := newLoopUnderTest(t)
	lt.launchPID(t, 41)
	step := func(id string, wantSoon bool, wantCycle string) {
		t.Helper()
		kicks := len(lt.kick)
		soon := lt.RayHead(id)
		lt.mu.Lock()
		cycling := lt.cycling
		lt.mu.Unlock()
		if soon != wantSoon || !strings.Contains(cycling, wantCycle) || (wantCycle == "") != (cycling == "") {
			t.Fatalf("RayHead(%q): soon %v, cycling %q; want soon %v, cycling %q", id, soon, cycling, wantSoon, wantCycle)
		}
		if wantCycle != "" && len(lt.kick) == 0 && kicks == 0 {
			t.Fatalf("RayHead(%q): restart without a kick", id)
		}
	}
	step("", false, "") // the head runs no Ray head, or it is not up yet
	step("aaaa", false, "")
	step("aaaa", false, "")
	step("", true, "the Ray head is gone (aaaa)")
	step("", true, "the Ray head is gone (aaaa)") // still restarting: no second cycle
	if len(lt.headBack) != 0 {
		t.Fatal("a Ray head named back before any was")
	}
	step("bbbb", false, "the Ray head is gone (aaaa)") // the new one: Ray's, no second restart
	if len(lt.headBack) != 1 {
		t.Fatal("the new Ray head did not release the held restart")
	}
	lt.launchPID(t, 42) // the held restart, toward bbbb
	step("bbbb", false, "")
	step("cccc", false, "the Ray head restarted (now cccc)")
}

// TestCopyRayOutputJoined proves the started line of real Ray's `ray
// start` output (2.52.1 and 2.60.0 print the same) is found once, and
// that every line still reaches the log.
func TestCopyRayOutputJoined(t *testing.T) {
	out := `2026-12-02 00:10:01,123	INFO scripts.py:1093 -- Local node IP: 203.0.113.7
2026-12-02 00:10:19,456	INFO node.py:431 -- Failed to get node info
[2m--------------------[0m
[32mRay runtime started.[0m
[2m--------------------[0m

To terminate the Ray runtime, run
  ray stop
--block
Ray runtime started.
`
	var got strings.Builder
	n := 0
	copyRayOutput(strings.NewReader(out), &got, func() { n++ })
	if n != 1 {
		t.Errorf("joined called %d times, want 1", n)
	}
	if got.String() != out {
		t.Errorf("log got %q, want every line", got.String())
	}
	n = 0
	copyRayOutput(strings.NewReader("Local node IP: 203.0.113.7\nError: timed out\n"), io.Discard, func() { n++ })
	if n != 0 {
		t.Errorf("joined called for output without the started line")
	}
}
