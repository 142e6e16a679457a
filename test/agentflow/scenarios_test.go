package agentflow

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestAgentRefused proves a 403 from the head ends the agent at once:
// it is not retried, the refusal is printed, Ray never starts, and the
// (wrong) token appears nowhere in the output.
func TestAgentRefused(t *testing.T) {
	f := newFlow(t)
	wrong := "WRONGtokenWRONGtokenWRONGtokenWRONGtoken123" // 43 chars, valid shape
	f.setEnv(wire.EnvJoinToken, wrong)
	f.secrets["wrong join token"] = wrong
	f.start()
	if code := f.wait(60 * time.Second); code == 0 {
		t.Errorf("agent exited 0 after a refusal")
	}
	out := f.out.String()
	if !strings.Contains(out, "enrollment refused") || !strings.Contains(out, "error=refused") {
		t.Errorf("the refusal is not printed:\n%s", out)
	}
	if n := strings.Count(out, "msg=enrolling"); n != 1 || strings.Contains(out, "op=enroll") {
		t.Errorf("enroll attempted %d times (or retried): a 403 must end enrollment", n)
	}
	if _, err := os.Stat(f.record); err == nil {
		t.Error("Ray started after a refusal")
	}
	assertNoSecrets(t, f)
}

// TestAgentStopAction proves the head's "stop" reaches Ray: the agent is
// frozen (SIGSTOP) until the head marks the node lost, then thawed; its
// next heartbeat is answered "stop", Ray gets SIGTERM, the agent exits
// with Ray's code.
func TestAgentStopAction(t *testing.T) {
	f := newFlow(t)
	f.start()
	f.waitRecord(90 * time.Second)
	f.head.waitNode(t, func(n wire.Node) bool { return n.Seq >= 1 })
	agent := f.agentPID()
	if err := syscall.Kill(agent, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	f.head.waitNode(t, func(n wire.Node) bool { return n.State == wire.StateLost })
	syscall.Kill(agent, syscall.SIGCONT)
	if code := f.wait(60 * time.Second); code != rayExitCode {
		t.Errorf("exit code %d, want Ray's %d", code, rayExitCode)
	}
	if rec := readRecord(t, f.record); rec.Signal != int(syscall.SIGTERM) {
		t.Errorf("ray got signal %d, want SIGTERM", rec.Signal)
	}
	if !strings.Contains(f.out.String(), "head asked to stop ray") {
		t.Error("the agent did not log the stop action")
	}
	assertNoSecrets(t, f)
}

// TestAgentHeadAway proves the agent outlives its head: with the head
// stopped it keeps Ray running and keeps trying; when the head is back
// (same state and ports) heartbeats resume.
func TestAgentHeadAway(t *testing.T) {
	f := newFlow(t)
	f.start()
	f.waitRecord(90 * time.Second)
	before := f.head.waitNode(t, func(n wire.Node) bool { return n.Seq >= 2 })
	failed := func() int { return strings.Count(f.out.String(), "heartbeat failed") }
	already := failed()
	f.head.stop()
	// Three failed heartbeats (about three intervals), counted in the
	// agent's log rather than guessed from a clock: a loaded machine may
	// run fewer in a fixed sleep. The agent must still be running after them.
	const failedWanted = 3
	if !rvtest.Until(60*time.Second, func() bool {
		select {
		case err := <-f.exited:
			f.exitSeen = true
			t.Fatalf("the agent exited while the head was away: %v", err)
		default:
		}
		return failed()-already >= failedWanted
	}) {
		t.Fatalf("%d failed heartbeats logged in 60 s while the head was away, want %d", failed()-already, failedWanted)
	}
	select {
	case err := <-f.exited:
		f.exitSeen = true
		t.Fatalf("the agent exited while the head was away: %v", err)
	default:
	}
	f.head.start(t)
	after := f.head.waitNode(t, func(n wire.Node) bool { return n.Seq > before.Seq+3 && n.State == wire.StateEnrolled })
	t.Logf("seq %d before the head left, %d after it came back", before.Seq, after.Seq)
	if !strings.Contains(f.out.String(), "heartbeat back") {
		t.Error("the agent did not log heartbeats resuming")
	}
	syscall.Kill(f.agentPID(), syscall.SIGTERM)
	if code := f.wait(60 * time.Second); code != rayExitCode {
		t.Errorf("exit code %d, want Ray's %d", code, rayExitCode)
	}
	assertNoSecrets(t, f)
}

// assertNoSecrets greps the agent's and the head's output for every secret.
func assertNoSecrets(t *testing.T, f *flow) {
	t.Helper()
	if key, err := os.ReadFile(f.state + "/node.key"); err == nil {
		f.secrets["node key"] = pemBody(string(key))
	}
	for name, s := range f.secrets {
		if s == "" {
			t.Errorf("secret %q is empty: the test would prove nothing", name)
			continue
		}
		if strings.Contains(f.out.String(), s) {
			t.Errorf("the %s appears in the agent's output", name)
		}
		if strings.Contains(f.head.stderr.String(), s) {
			t.Errorf("the %s appears in the head's output", name)
		}
	}
}

// TestAgentOldRay: an image whose Ray is older than 2.52 (no token auth)
// is refused after the token as ray_version: the agent reports the
// version it found, exits 1 without starting Ray, and head status shows
// the reason on the candidate.
func TestAgentOldRay(t *testing.T) {
	f := newFlow(t)
	f.setEnv("FAKERAY_VERSION", "2.47.1")
	f.start()
	if code := f.wait(60 * time.Second); code != 1 {
		t.Errorf("agent exit %d, want 1", code)
	}
	out := f.out.String()
	if !strings.Contains(out, "ray_version=2.47.1") || !strings.Contains(out, "reason=ray_version") {
		t.Errorf("the agent does not say which Ray it found and why it was refused:\n%s", out)
	}
	if _, err := os.Stat(f.record); err == nil {
		t.Error("Ray started after a ray_version refusal")
	}
	st, err := exec.Command(f.head.bin, "status", "--state", f.head.state).CombinedOutput()
	if err != nil {
		t.Fatalf("head status: %v\n%s", err, st)
	}
	found := false
	for _, line := range strings.Split(string(st), "\n") {
		if strings.Contains(line, f.created.CandidateID) {
			found = strings.Contains(line, wire.ReasonRayVersion)
		}
	}
	if !found {
		t.Errorf("head status does not show ray_version on %s:\n%s", f.created.CandidateID, st)
	}
	if !strings.Contains(f.head.stderr.String(), "fix the node image") {
		t.Errorf("the head's log does not say the image is wrong:\n%s", f.head.stderr.String())
	}
	assertNoSecrets(t, f)
}
