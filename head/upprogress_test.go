package main

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/internal/wire"
)

func TestProgressLines(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out)
	log := slog.New(dphTap{slog.NewTextHandler(&bytes.Buffer{}, nil), p}).With("provider", "vast")
	log.Info("vast rented", "candidate", "c-1", "instance", "7", "dph", 0.25)
	log.Info("vast rented", "candidate", "c-2", "dph", 0.5)
	log.Info("no price", "candidate", "c-3")
	seen := map[string]string{}
	cands := []wire.Candidate{{CandidateID: "c-1", NodeType: "gpu", State: "enrolled", InstanceID: "7", PublicIP: "198.51.100.7"},
		{CandidateID: "c-2", NodeType: "gpu", State: "ended", Reason: "security_check"}, {CandidateID: "c-3", NodeType: "gpu", State: "pending"}}
	got := changes(seen, cands)
	want := []string{"rental c-1 (gpu): enrolled (instance 7, ip 198.51.100.7)", "rental c-2 (gpu): ended (reason security_check)", "rental c-3 (gpu): pending"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if again := changes(seen, cands); len(again) != 0 {
		t.Errorf("unchanged states printed again: %v", again)
	}
	if dph, ok := p.liveDPH(cands); !ok || dph != 0.25 {
		t.Errorf("live $/h = %v %v, want 0.25 (c-2 ended, c-3 unpriced)", dph, ok)
	}
	if !strings.Contains(out.String(), "rental c-1: rented at $0.250/h") || strings.Contains(out.String(), "c-3: rented") {
		t.Errorf("price lines:\n%s", out.String())
	}
	line := summaryLine(cands, []wire.Node{{Ray: wire.RayStatus{State: "running"}}}, rayhead.Status{State: "running", Restarts: 2})
	if line != "rentals: 1 ended, 1 enrolled, 1 pending · nodes: 1 (1 with Ray running) · Ray head: running (2 restarts)" {
		t.Errorf("summary %q", line)
	}
}

func TestRayHeadLineStale(t *testing.T) {
	now := time.Now()
	live := rayHeadLine(rayhead.Status{State: "running", Address: "10.0.0.1:6379", PID: os.Getpid(), Since: now}, now)
	if strings.Contains(live, "gone") || !strings.HasPrefix(live, "RAY HEAD  10.0.0.1:6379  running") {
		t.Errorf("live pid: %q", live)
	}
	// A pid that cannot exist (above pid_max's ceiling of 2^22).
	stale := rayHeadLine(rayhead.Status{State: "running", Address: "10.0.0.1:6379", PID: 1<<22 + 7, Since: now}, now)
	if !strings.Contains(stale, "gone") {
		t.Errorf("stale pid: %q", stale)
	}
}
