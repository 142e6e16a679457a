package raylife

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestRayStartingUntilJoined proves a node's Ray is reported starting from
// each start until Ray says its node joined the cluster, then running; a
// late "joined" of an earlier start does not make the next one running.
func TestRayStartingUntilJoined(t *testing.T) {
	lt := newRayUnderTest(t, 0)
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
	lt := newRayUnderTest(t, 50*time.Millisecond)
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

	lt2 := newRayUnderTest(t, 50*time.Millisecond)
	lt2.launchPID(t, 43)
	lt2.joinedOf(0)()
	select {
	case r := <-lt2.got:
		t.Errorf("a Ray that joined got report %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
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
	CopyOutput(strings.NewReader(out), &got, func() { n++ })
	if n != 1 {
		t.Errorf("joined called %d times, want 1", n)
	}
	if got.String() != out {
		t.Errorf("log got %q, want every line", got.String())
	}
	n = 0
	CopyOutput(strings.NewReader("Local node IP: 203.0.113.7\nError: timed out\n"), io.Discard, func() { n++ })
	if n != 0 {
		t.Errorf("joined called for output without the started line")
	}
}
