package registry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

func newClock() *rvtest.Clock { return rvtest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)) }
func open(t *testing.T, path string, c *rvtest.Clock) *Registry {
	t.Helper()
	r, err := Open(Config{Path: path, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func running(t *testing.T, r *Registry, inst, ip string) (wire.Candidate, secret.String) {
	t.Helper()
	c, tok, err := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: inst, PublicIP: ip, HostID: "h-" + inst})
	if err != nil {
		t.Fatal(err)
	}
	if c.State != wire.StateRunning {
		t.Fatalf("state %s, want running", c.State)
	}
	return c, tok
}

func TestTokenShape(t *testing.T) {
	r := open(t, "", newClock())
	_, tok, _ := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	if got := len(tok.Reveal()); got != wire.JoinTokenLen || strings.ContainsAny(tok.Reveal(), "+/=") {
		t.Errorf("token %d chars, want %d base64url without padding", got, wire.JoinTokenLen)
	}
}

// TestClaimRefusals drives each step-2 refusal and proves none consumes the token.
func TestClaimRefusals(t *testing.T) {
	r := open(t, "", newClock())
	_, tok := running(t, r, "i1", "127.0.0.5")
	ended, tok2 := running(t, r, "i2", "127.0.0.6")
	r.End(ended.CandidateID, "test")
	wrong := secret.New(strings.Repeat("A", 43))
	for _, c := range []struct {
		name, inst, ip string
		tok            secret.String
		want           string
	}{
		{"unknown", "nope", "127.0.0.5", tok, RefuseUnknown},
		{"ended", "i2", "127.0.0.6", tok2, RefuseEnded},
		{"source ip", "i1", "127.0.0.9", tok, RefuseSourceIP},
		{"token", "i1", "127.0.0.5", wrong, RefuseToken},
	} {
		_, err := r.Claim(c.inst, c.ip, c.tok, testKey)
		var re *RefusalError
		if !errors.As(err, &re) || re.Reason != c.want {
			t.Errorf("%s: err = %v, want refusal %s", c.name, err, c.want)
		}
	}
	cl, err := r.Claim("i1", "127.0.0.5", tok, testKey)
	if err != nil {
		t.Fatalf("refusals burned the token: %v", err)
	}
	if _, err := r.Claim("i1", "127.0.0.5", tok, testKey); err == nil || !strings.Contains(err.Error(), RefuseInFlight) {
		t.Errorf("second claim while in flight: %v", err)
	}
	if _, err := r.Complete(cl, Enrolled{Serial: "ab"}); err != nil {
		t.Fatal(err)
	}
	other := secret.NewBytes(make([]byte, 32))
	if _, err := r.Claim("i1", "127.0.0.5", tok, other); err == nil || !strings.Contains(err.Error(), RefuseEnrolled) {
		t.Errorf("claim after enrollment with another port_key: %v", err)
	}
}

// TestClaimIsAtomic: of N concurrent claims with one token exactly one wins.
func TestClaimIsAtomic(t *testing.T) {
	r := open(t, filepath.Join(t.TempDir(), "state.json"), newClock())
	_, tok := running(t, r, "i1", "127.0.0.5")
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Claim("i1", "127.0.0.5", tok, testKey); err == nil {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := wins.Load(); got != 1 {
		t.Errorf("%d claims won, want exactly 1", got)
	}
}

func TestSlots(t *testing.T) {
	r := open(t, "", newClock())
	var claims []*Claim
	for i, inst := range []string{"a", "b", "c"} {
		_, tok := running(t, r, inst, "127.0.0."+string(rune('5'+i)))
		cl, err := r.Claim(inst, "127.0.0."+string(rune('5'+i)), tok, testKey)
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, cl)
	}
	got := []bool{r.TakeSlot(claims[0], 2), r.TakeSlot(claims[1], 2), r.TakeSlot(claims[2], 2)}
	if !got[0] || !got[1] || got[2] {
		t.Errorf("slots of 2 for 3 claims = %v, want [true true false]", got)
	}
	r.Release(claims[1])
	if !r.TakeSlot(claims[2], 2) {
		t.Error("a released slot was not free again")
	}
}

// TestRestart proves candidates, nodes and serials survive a reopen, the
// token is at rest only as a hash, and a candidate made before the restart
// can still be claimed with its token.
func TestRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	clk := newClock()
	r := open(t, path, clk)
	t.Cleanup(func() { r.Close() })
	_, tok1 := running(t, r, "i1", "127.0.0.5")
	_, tok2 := running(t, r, "i2", "127.0.0.6")
	cl, _ := r.Claim("i1", "127.0.0.5", tok1, testKey)
	r.Complete(cl, Enrolled{Serial: "0abc"})
	_, tok3 := running(t, r, "i3", "127.0.0.7")
	r.Claim("i3", "127.0.0.7", tok3, testKey) // interrupted by the restart

	raw, _ := os.ReadFile(path)
	for _, s := range []secret.String{tok1, tok2, tok3} {
		if strings.Contains(string(raw), s.Reveal()) {
			t.Fatal("state file holds a join token in clear")
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
	}

	r.Close()
	r2 := open(t, path, clk)
	if n, ok := r2.Live("i1"); !ok || n.Serial != "0abc" {
		t.Errorf("node after restart: %+v %v", n, ok)
	}
	if s := r2.Serials(); len(s) != 1 || s[0].Serial != "0abc" {
		t.Errorf("serials after restart: %v", s)
	}
	if _, err := r2.Claim("i2", "127.0.0.6", tok2, testKey); err != nil {
		t.Errorf("candidate from before the restart cannot enroll: %v", err)
	}
	for _, c := range r2.Candidates() {
		if c.InstanceID == "i3" && c.State != wire.StateRunning {
			t.Errorf("interrupted enrollment is %s, want running (a retry resumes it)", c.State)
		}
	}
	if cl, err := r2.Claim("i3", "127.0.0.7", tok3, testKey); err != nil || cl.Reissue {
		t.Errorf("retry of the interrupted enrollment: %+v %v, want a resume", cl, err)
	}
	r2.Close()
	// Past the window nobody can finish it: the next start destroys it.
	clk.Add(RetryWindow)
	r3 := open(t, path, clk)
	for _, c := range r3.Candidates() {
		if c.InstanceID == "i3" && c.State != wire.StateDestroyRequested {
			t.Errorf("interrupted enrollment past the window is %s, want destroy_requested", c.State)
		}
	}
}

func TestLostAndEnded(t *testing.T) {
	clk := newClock()
	r := open(t, "", clk)
	c, tok := running(t, r, "i1", "127.0.0.5")
	cl, _ := r.Claim("i1", "127.0.0.5", tok, testKey)
	r.Complete(cl, Enrolled{Serial: "01"})
	iv := 10 * time.Second
	clk.Add(29 * time.Second)
	if lost, _ := r.SweepLost(iv); len(lost) != 0 {
		t.Fatalf("lost after 2.9 intervals")
	}
	if a, err := r.Heartbeat(wire.Heartbeat{InstanceID: "i1", Seq: 1}); err != nil || a != wire.ActionNone {
		t.Fatalf("heartbeat: %s %v", a, err)
	}
	clk.Add(30 * time.Second)
	lost, _ := r.SweepLost(iv)
	if len(lost) != 1 || lost[0].CandidateID != c.CandidateID {
		t.Fatalf("lost = %v, want i1", lost)
	}
	if a, _ := r.Heartbeat(wire.Heartbeat{InstanceID: "i1", Seq: 2}); a != wire.ActionStop {
		t.Errorf("a lost node's heartbeat got action %q, want stop", a)
	}
	r.End(c.CandidateID, "deleted")
	if _, ok := r.Live("i1"); ok {
		t.Error("ended node still live")
	}
	if _, err := r.Heartbeat(wire.Heartbeat{InstanceID: "i1"}); err == nil {
		t.Error("ended node's heartbeat accepted")
	}
}

func TestHealth(t *testing.T) {
	r := open(t, "", newClock())
	_, tok := running(t, r, "i1", "127.0.0.5")
	cl, _ := r.Claim("i1", "127.0.0.5", tok, testKey)
	r.Complete(cl, Enrolled{Serial: "01"})
	for i, want := range []string{wire.HealthUnknown, wire.HealthUnknown, wire.HealthUnhealthy} {
		r.SetHealth("i1", false, 3)
		if n, _ := r.Node("i1"); n.Health != want {
			t.Errorf("after %d failures health %s, want %s", i+1, n.Health, want)
		}
	}
	r.SetHealth("i1", true, 3)
	if n, _ := r.Node("i1"); n.Health != wire.HealthHealthy || n.HealthFailures != 0 {
		t.Errorf("after success: %s %d", n.Health, n.HealthFailures)
	}
}

func TestPatch(t *testing.T) {
	r := open(t, "", newClock())
	c, _, _ := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	got, err := r.Patch(c.CandidateID, wire.CandidatePatch{InstanceID: "i9", HostID: "h"})
	if err != nil || got.State != wire.StateRented {
		t.Fatalf("patch instance: %v %v", got.State, err)
	}
	got, err = r.Patch(c.CandidateID, wire.CandidatePatch{PublicIP: "127.0.0.9"})
	if err != nil || got.State != wire.StateRunning {
		t.Fatalf("patch ip: %v %v", got.State, err)
	}
	if _, err := r.Patch(c.CandidateID, wire.CandidatePatch{InstanceID: "other"}); !errors.Is(err, ErrConflict) {
		t.Errorf("re-setting instance_id: %v, want conflict", err)
	}
	if _, err := r.Patch("c-nope", wire.CandidatePatch{HostID: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown candidate: %v", err)
	}
	if _, _, err := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: "i9"}); !errors.Is(err, ErrConflict) {
		t.Errorf("duplicate live instance id: %v", err)
	}
}

// testKey is the port_key the tests' agents enroll with.
var testKey = secret.NewBytes([]byte("0123456789abcdef0123456789abcdef"))
