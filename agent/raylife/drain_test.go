package raylife

import (
	"context"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/supervise"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestDrainedRayNotStartedAgain proves that a Ray that exits on its own
// (as a drained raylet's `ray start --block` does) is not started again
// once the head drains the node, even when the head began the drain after
// the last heartbeat: the exit asks for a heartbeat at once, and its
// answer's drain notice holds Ray down, said in a ray_exited report, until
// a stop ends the loop. A later answer without the notice lets Ray start
// again. The only test here that runs a real Supervisor (one per process).
func TestDrainedRayNotStartedAgain(t *testing.T) {
	var starts atomic.Int32
	reports := make(chan wire.Report, 16)
	sup := supervise.New(supervise.Config{Grace: time.Second})
	var r *Ray
	drainOnBeat := atomic.Bool{}
	drainOnBeat.Store(true)
	deadline := time.Date(2026, 12, 7, 15, 2, 0, 0, time.UTC)
	r = New(Config{
		Supervisor: sup,
		Policy:     supervise.RestartPolicy{MaxRestarts: 50, Window: time.Minute, Delay: time.Millisecond},
		Command: func(func()) (*exec.Cmd, func(), error) {
			starts.Add(1)
			return exec.Command("sh", "-c", "exit 0"), func() {}, nil // Ray exits at once, as a drained one does
		},
		Report: func(event, detail string) { reports <- wire.Report{Event: event, Detail: detail} },
		// The heartbeat Ray's exit asks for: the head has begun the drain since the last one.
		Beat: func(context.Context) {
			if drainOnBeat.Load() {
				r.Drain(&wire.DrainNotice{Deadline: deadline})
			}
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { code, _ := r.Run(); done <- code }()
	want := func(event, detail string) {
		t.Helper()
		select {
		case rep := <-reports:
			if rep.Event != event || !strings.Contains(rep.Detail, detail) {
				t.Fatalf("report %+v, want %s with %q", rep, event, detail)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("no %s report (%d starts)", event, starts.Load())
		}
	}
	want(wire.EventRayExited, "not started again: the head drains this node (deadline 2026-12-07T15:02:00Z)")
	if n := starts.Load(); n != 1 {
		t.Fatalf("%d starts of Ray, want 1: a drained node's Ray was started again", n)
	}
	if st := r.Status(); st.State != wire.RayExited {
		t.Errorf("held Ray's state %s, want exited", st.State)
	}
	drainOnBeat.Store(false)
	r.Drain(nil) // a later answer: the head dropped the drain
	want(wire.EventRayRestarted, "the head no longer drains this node")
	want(wire.EventRayExited, "exit code 0") // the new Ray exits too, and is restarted as usual
	sup.Stop()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
}
