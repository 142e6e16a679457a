package raylife

import (
	"io"
	"log/slog"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/supervise"
	"github.com/rayvast/rayvast/internal/wire"
)

// rayUnderTest is a Ray whose starts are recorded, not run: one
// Supervisor per process may reap, so these tests drive the loop's
// bookkeeping only (test/agentflow and test/e2e run it for real).
type rayUnderTest struct {
	*Ray
	mu      sync.Mutex
	joined  []func() // per start, what Ray's output watcher would call
	reports []wire.Report
	got     chan wire.Report
}

// newRayUnderTest is a Ray with join bound joinTimeout (zero: the default).
func newRayUnderTest(t *testing.T, joinTimeout time.Duration) *rayUnderTest {
	t.Helper()
	lt := &rayUnderTest{got: make(chan wire.Report, 16)}
	lt.Ray = New(Config{
		Supervisor: supervise.New(supervise.Config{}),
		Policy:     supervise.DefaultRestartPolicy(),
		Command: func(joined func()) (*exec.Cmd, func(), error) {
			lt.mu.Lock()
			lt.joined = append(lt.joined, joined)
			lt.mu.Unlock()
			return exec.Command("true"), func() {}, nil
		},
		Report:      func(event, detail string) { lt.got <- wire.Report{Event: event, Detail: detail} },
		LastWords:   func() string { return "Error: GCS at 10.0.0.1:6379 unreachable" },
		JoinTimeout: joinTimeout,
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	return lt
}

func (lt *rayUnderTest) launchPID(t *testing.T, pid int) {
	t.Helper()
	if err := lt.launch(func(*exec.Cmd) (int, error) { return pid, nil }); err != nil {
		t.Fatal(err)
	}
}

func (lt *rayUnderTest) joinedOf(i int) func() {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.joined[i]
}
