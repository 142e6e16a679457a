package raylife

import (
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/supervise"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestFailedRestartsBackOffToCrashLoop proves a restart whose start fails
// (Ray's command cannot be made) is reported as Ray's exit and counted like
// one: the loop backs off and tries again until the policy's restarts are
// spent, then reports the crash loop, and never says Ray restarted.
func TestFailedRestartsBackOffToCrashLoop(t *testing.T) {
	var got []wire.Report
	r := New(Config{
		Supervisor: supervise.New(supervise.Config{}),
		Policy:     supervise.RestartPolicy{MaxRestarts: 2, Window: time.Minute, Delay: time.Millisecond},
		Command: func(func()) (*exec.Cmd, func(), error) {
			return nil, nil, errors.New("ray: not found")
		},
		Report: func(event, detail string) { got = append(got, wire.Report{Event: event, Detail: detail}) },
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if out := r.restartNow("the Ray head restarted"); out != crashLoop {
		t.Fatalf("outcome %d, want crashLoop (%d)", out, crashLoop)
	}
	want := []wire.Report{
		{Event: wire.EventRayExited, Detail: "restart failed: ray: not found"}, // restartNow's own try
		{Event: wire.EventRayExited, Detail: "restart failed: ray: not found"}, // backoff 1
		{Event: wire.EventRayExited, Detail: "restart failed: ray: not found"}, // backoff 2
		{Event: wire.EventRayCrashloop, Detail: "exit code -1 after 3 restarts"},
	}
	if len(got) != len(want) {
		t.Fatalf("reports %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("report %d: %v, want %v", i, got[i], want[i])
		}
	}
}
