package agentflow

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestAgentRestartsRay proves Ray killed inside a node (SIGKILL, then
// SIGSEGV: what a raylet crash looks like) is started again within seconds
// with the same argv, that the head sees restarts 1 then 2 in heartbeats,
// and that the agent's SIGTERM still ends everything with Ray's code.
func TestAgentRestartsRay(t *testing.T) {
	f := newFlow(t)
	f.setEnv(wire.EnvRayRestartDelay, "200ms")
	f.start()
	first := f.waitRecord(90 * time.Second)
	f.head.waitNode(t, func(n wire.Node) bool { return n.Seq >= 1 && n.Ray.State == wire.RayRunning })
	agent := f.agentPID()
	prev := first
	for i, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSEGV} {
		ray := onlyChild(t, agent)
		killed := time.Now()
		if err := syscall.Kill(ray, sig); err != nil {
			t.Fatal(err)
		}
		next := f.waitNewRecord(prev.PID, 30*time.Second)
		t.Logf("BUDGET ray running again %v after %v", time.Since(killed).Round(time.Millisecond), sig)
		if !slices.Equal(next.OrigArgv, first.OrigArgv) {
			t.Errorf("restarted ray's argv %q, want the first %q", next.OrigArgv, first.OrigArgv)
		}
		n := f.head.waitNode(t, func(n wire.Node) bool { return n.Ray.Restarts == i+1 && n.Ray.State == wire.RayRunning })
		if n.State != wire.StateEnrolled {
			t.Errorf("node state %s after restart %d, want enrolled", n.State, i+1)
		}
		prev = next
	}
	out := f.out.String()
	for _, want := range []string{"reported event=ray_exited", "reported event=ray_restarted"} {
		if strings.Count(out, want) != 2 {
			t.Errorf("agent log has %d %q, want 2", strings.Count(out, want), want)
		}
	}
	if !strings.Contains(f.head.stderr.String(), "event=ray_restarted") {
		t.Error("the head did not log the ray_restarted report")
	}
	syscall.Kill(agent, syscall.SIGTERM)
	if code := f.wait(60 * time.Second); code != rayExitCode {
		t.Errorf("exit code %d after SIGTERM, want Ray's %d", code, rayExitCode)
	}
	if rec := readRecord(t, f.record); rec.Signal != int(syscall.SIGTERM) {
		t.Errorf("the restarted ray got signal %d, want SIGTERM", rec.Signal)
	}
	assertNoSecrets(t, f)
}

// TestAgentCrashloop proves a Ray that keeps exiting is restarted
// RAYVAST_RAY_MAX_RESTARTS times, then the agent reports ray_crashloop and
// exits with Ray's code, and the head ends the node on that report at once
// (well within one heartbeat interval), not 3 silent intervals later.
func TestAgentCrashloop(t *testing.T) {
	f := newFlow(t)
	f.setEnv(wire.EnvRayMaxRestarts, "2")
	f.setEnv(wire.EnvRayRestartDelay, "100ms")
	f.setEnv("FAKERAY_EXIT_AFTER", "0.5")
	f.setEnv("FAKERAY_EXIT_CODE", "3")
	f.start()
	if code := f.wait(120 * time.Second); code != 3 {
		t.Errorf("exit code %d, want Ray's 3", code)
	}
	exited := time.Now()
	out := f.out.String()
	if n := strings.Count(out, "msg=\"ray restarted\""); n != 2 {
		t.Errorf("ray restarted %d times, want 2 (RAYVAST_RAY_MAX_RESTARTS)", n)
	}
	if !strings.Contains(out, "reported event=ray_crashloop") {
		t.Errorf("the agent did not report ray_crashloop:\n%s", out)
	}
	// The head ended the candidate before the agent exited (the report is
	// delivered first); allow one heartbeat interval (1 s) for the poll.
	var c wire.Candidate
	rvtest.Until(time.Until(exited.Add(time.Second)), func() bool {
		c = f.head.candidate(t, f.created.CandidateID)
		return c.State == wire.StateDestroyRequested || c.State == wire.StateEnded
	})
	if (c.State != wire.StateDestroyRequested && c.State != wire.StateEnded) || c.Reason != "ray_crashloop" {
		t.Errorf("candidate %s (%s) after the crash loop, want ended/destroy_requested for ray_crashloop", c.State, c.Reason)
	}
	assertNoSecrets(t, f)
}

// waitNewRecord waits for fakeray's record of a Ray other than pid.
func (f *flow) waitNewRecord(pid int, limit time.Duration) fakeRecord {
	f.t.Helper()
	var r fakeRecord
	if !rvtest.Until(limit, func() bool { r = readRecord(f.t, f.record); return r.PID != pid }) {
		f.t.Fatalf("ray (pid %d in its namespace) was not started again within %v", pid, limit)
	}
	return r
}

func (h *head) candidate(t *testing.T, id string) wire.Candidate {
	t.Helper()
	cs, err := h.admin.Candidates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.CandidateID == id {
			return c
		}
	}
	t.Fatalf("candidate %s not listed", id)
	return wire.Candidate{}
}

// TestAgentSignalDuringBackoff proves a SIGTERM to PID 1 while Ray waits
// for its restart ends the agent at once with 128+SIGTERM (no Ray ran to
// pass a code on), and Ray is not started again.
func TestAgentSignalDuringBackoff(t *testing.T) {
	f := newFlow(t)
	f.setEnv(wire.EnvRayRestartDelay, "1h")
	f.setEnv("FAKERAY_EXIT_AFTER", "0.3")
	f.setEnv("FAKERAY_EXIT_CODE", "3")
	f.start()
	first := f.waitRecord(90 * time.Second)
	if !rvtest.Until(30*time.Second, func() bool { return strings.Contains(f.out.String(), `msg="restarting ray"`) }) {
		t.Fatal("the agent never started a restart backoff")
	}
	f.head.waitNode(t, func(n wire.Node) bool { return n.Ray.State == wire.RayExited })
	syscall.Kill(f.agentPID(), syscall.SIGTERM)
	if code := f.wait(30 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d (SIGTERM while no Ray ran)", code, 128+int(syscall.SIGTERM))
	}
	if rec := readRecord(t, f.record); rec.PID != first.PID {
		t.Errorf("ray was started again (pid %d, first %d) after the stop", rec.PID, first.PID)
	}
}
