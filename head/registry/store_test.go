package registry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

func openAt(t *testing.T, cfg Config) *Registry {
	t.Helper()
	r, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestFailedWriteChangesNothing: with the disk refusing writes, every change
// answers an error and leaves memory as it was; once the disk is back the
// same call does the work.
func TestFailedWriteChangesNothing(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "state.db")
	r := openAt(t, Config{Path: path, Now: clk.Now})
	c := enrolled(t, r, "i1", "127.0.0.5")
	p, _, _ := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	diskFull := errors.New("no space left on device")
	r.store.fail = func() error { return diskFull }

	if _, err := r.End(c.CandidateID, "deleted"); !errors.Is(err, diskFull) {
		t.Fatalf("End on a full disk: %v, want the write error", err)
	}
	if _, ok := r.Live("i1"); !ok {
		t.Error("a failed End ended the node in memory")
	}
	if _, err := r.Patch(p.CandidateID, wire.CandidatePatch{InstanceID: "i2"}); err == nil {
		t.Error("Patch on a full disk succeeded")
	}
	if got, _ := r.Candidate(p.CandidateID); got.InstanceID != "" {
		t.Errorf("a failed Patch set instance_id %q", got.InstanceID)
	}
	if _, _, err := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: "i2"}); err == nil {
		t.Error("NewCandidate on a full disk succeeded")
	}
	_, tok := running2(t, r, diskFull)
	clk.Add(time.Minute)
	if lost, err := r.SweepLost(time.Second); err == nil || len(lost) != 0 {
		t.Errorf("SweepLost on a full disk: %v %v", lost, err)
	}

	r.store.fail = nil
	if _, err := r.End(c.CandidateID, "deleted"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Live("i1"); ok {
		t.Error("retried End did not end the node")
	}
	_ = tok
	r.Close()
	r2 := openAt(t, Config{Path: path, Now: clk.Now})
	if _, ok := r2.Live("i1"); ok {
		t.Error("node live again after a restart")
	}
	if _, _, err := r2.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: "i2"}); err != nil {
		t.Errorf("instance id held by a failed NewCandidate: %v", err)
	}
}

// running2 makes a candidate on a failing disk and checks it is not there.
func running2(t *testing.T, r *Registry, want error) (wire.Candidate, secret.String) {
	t.Helper()
	c, tok, err := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: "i3", PublicIP: "127.0.0.7"})
	if !errors.Is(err, want) {
		t.Fatalf("NewCandidate: %v, want %v", err, want)
	}
	if len(r.Candidates()) != 2 {
		t.Errorf("a failed NewCandidate is listed")
	}
	return c, tok
}

// TestFailedClaimKeepsToken: a consumption that did not reach the disk does
// not burn the token; the agent's retry enrolls.
func TestFailedClaimKeepsToken(t *testing.T) {
	r := openAt(t, Config{Path: filepath.Join(t.TempDir(), "state.db"), Now: newClock().Now})
	_, tok := running(t, r, "i1", "127.0.0.5")
	r.store.fail = func() error { return errors.New("eio") }
	if _, err := r.Claim("i1", "127.0.0.5", tok, testKey); err == nil {
		t.Fatal("claim on a failing disk succeeded")
	}
	r.store.fail = nil
	if _, err := r.Claim("i1", "127.0.0.5", tok, testKey); err != nil {
		t.Errorf("retry after a failed write: %v", err)
	}
}

// TestRetry drives docs/protocol.md §6 step 2 Retries: the same agent gets a Reissue;
// another port_key, another IP, a retry while one runs, or one after the
// window are refused.
func TestRetry(t *testing.T) {
	clk := newClock()
	r := openAt(t, Config{Now: clk.Now})
	_, tok := running(t, r, "i1", "127.0.0.5")
	cl, _ := r.Claim("i1", "127.0.0.5", tok, testKey)
	if _, err := r.Claim("i1", "127.0.0.5", tok, testKey); !isRefusal(err, RefuseInFlight) {
		t.Errorf("retry while the enrollment runs: %v, want in_flight", err)
	}
	r.Complete(cl, Enrolled{Serial: "old"})
	for _, c := range []struct {
		name, ip string
		key      secret.Bytes
		want     string
	}{
		{"other port_key", "127.0.0.5", secret.NewBytes(make([]byte, 32)), RefuseEnrolled},
		{"other ip", "127.0.0.9", testKey, RefuseSourceIP},
	} {
		if _, err := r.Claim("i1", c.ip, tok, c.key); !isRefusal(err, c.want) {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	clk.Add(RetryWindow - time.Second)
	again, err := r.Claim("i1", "127.0.0.5", tok, testKey)
	if err != nil || !again.Reissue {
		t.Fatalf("same agent within the window: %+v %v, want a reissue", again, err)
	}
	if _, err := r.Claim("i1", "127.0.0.5", tok, testKey); !isRefusal(err, RefuseInFlight) {
		t.Errorf("second retry while a reissue runs: %v", err)
	}
	if _, err := r.Reissue(again, "new"); err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Live("i1"); n.Serial != "new" {
		t.Errorf("serial after reissue %q, want new", n.Serial)
	}
	clk.Add(time.Second)
	if _, err := r.Claim("i1", "127.0.0.5", tok, testKey); !isRefusal(err, RefuseEnrolled) {
		t.Errorf("retry after the window: %v, want refused", err)
	}
}

func isRefusal(err error, reason string) bool {
	var re *RefusalError
	return errors.As(err, &re) && re.Reason == reason
}

// TestStoreMissing: a state dir that served (StoreID known) refuses a store
// that vanished, was emptied or is another's, instead of starting empty.
func TestStoreMissing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	r, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	id := r.StoreID()
	r.Close()
	if id == "" {
		t.Fatal("no store id")
	}
	if r, err := Open(Config{Path: path, StoreID: id}); err != nil {
		t.Fatalf("reopen with its id: %v", err)
	} else {
		r.Close()
	}
	os.Remove(path)
	if _, err := Open(Config{Path: path, StoreID: id}); !errors.Is(err, ErrNoStore) {
		t.Errorf("vanished store: %v, want ErrNoStore", err)
	}
	os.WriteFile(path, nil, 0o600)
	if _, err := Open(Config{Path: path, StoreID: id}); !errors.Is(err, ErrNoStore) {
		t.Errorf("emptied store: %v, want ErrNoStore", err)
	}
	os.Remove(path)
	if r, err := Open(Config{Path: path}); err == nil {
		r.Close()
	}
	if _, err := Open(Config{Path: path, StoreID: id}); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), id) {
		t.Errorf("another store: %v, want ErrNoStore naming %s", err, id)
	}
}

// TestMigrateV1: a v1 state.json is read into a new store once and renamed.
func TestMigrateV1(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "state.json")
	v1 := `{"version":1,"candidates":[{"candidate_id":"c-1","node_type":"gpu1","instance_id":"i1","public_ip":"127.0.0.5",
	 "state":"enrolled","created_at":"2026-11-30T11:00:00Z","updated_at":"2026-11-30T11:00:00Z","consumed":true},
	 {"candidate_id":"c-2","node_type":"gpu1","instance_id":"i2","public_ip":"127.0.0.6","state":"running",
	 "created_at":"2026-11-30T11:00:00Z","updated_at":"2026-11-30T11:00:00Z","consumed":true}],
	 "nodes":[{"instance_id":"i1","candidate_id":"c-1","node_type":"gpu1","public_ip":"127.0.0.5","state":"enrolled","serial":"0a"}],
	 "serials":[{"instance_id":"i1","serial":"0a","issued_at":"2026-11-30T11:00:00Z"}]}`
	os.WriteFile(legacy, []byte(v1), 0o600)
	cfg := Config{Path: filepath.Join(dir, "state.db"), LegacyPath: legacy, Now: newClock().Now}
	r := openAt(t, cfg)
	if n, ok := r.Live("i1"); !ok || n.Serial != "0a" {
		t.Errorf("migrated node: %+v %v", n, ok)
	}
	if c, _ := r.Candidate("c-2"); c.State != wire.StateDestroyRequested {
		t.Errorf("v1 interrupted enrollment (no consumption time) is %s, want destroy_requested", c.State)
	}
	if _, err := os.Stat(legacy + ".migrated"); err != nil {
		t.Errorf("v1 file not renamed: %v", err)
	}
	r.Close()
	r2 := openAt(t, cfg)
	if len(r2.Serials()) != 1 || len(r2.Candidates()) != 2 {
		t.Errorf("after reopen: %d serials %d candidates", len(r2.Serials()), len(r2.Candidates()))
	}
}

// TestPrune: ended candidates older than the retention go, with their node
// and serials, from memory and disk; the rest stay.
func TestPrune(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "state.db")
	r := openAt(t, Config{Path: path, Now: clk.Now})
	old := enrolled(t, r, "i1", "127.0.0.5")
	enrolled(t, r, "i2", "127.0.0.6")
	r.End(old.CandidateID, "deleted")
	clk.Add(time.Hour)
	if n, _ := r.Prune(2 * time.Hour); n != 0 {
		t.Errorf("pruned %d inside the retention", n)
	}
	clk.Add(2 * time.Hour)
	if n, err := r.Prune(2 * time.Hour); n != 1 || err != nil {
		t.Fatalf("pruned %d (%v), want 1", n, err)
	}
	if _, ok := r.Node("i1"); ok || len(r.Candidates()) != 1 || len(r.Serials()) != 1 || r.Pruned() != 1 {
		t.Errorf("after prune: node i1 kept %v, %d candidates, %d serials, pruned %d", ok, len(r.Candidates()), len(r.Serials()), r.Pruned())
	}
	r.Close()
	r2 := openAt(t, Config{Path: path, Now: clk.Now})
	if len(r2.Candidates()) != 1 || len(r2.Serials()) != 1 {
		t.Errorf("after reopen: %d candidates %d serials, want 1 1", len(r2.Candidates()), len(r2.Serials()))
	}
}

// TestGrace: a Grace gives every node 3 fresh intervals.
func TestGrace(t *testing.T) {
	clk := newClock()
	r := openAt(t, Config{Now: clk.Now})
	enrolled(t, r, "i1", "127.0.0.5")
	clk.Add(25 * time.Second)
	r.Grace()
	clk.Add(25 * time.Second)
	if lost, _ := r.SweepLost(10 * time.Second); len(lost) != 0 {
		t.Errorf("lost 2.5 intervals after a grace")
	}
	clk.Add(5 * time.Second)
	if lost, _ := r.SweepLost(10 * time.Second); len(lost) != 1 {
		t.Errorf("not lost 3 intervals after a grace")
	}
}

// TestHeartbeatsDoNotWaitForTheDisk: while a change's write is stuck in the
// disk, heartbeats, reads and changes of other candidates go on; a second
// change of the same candidate waits for the first.
func TestHeartbeatsDoNotWaitForTheDisk(t *testing.T) {
	r := openAt(t, Config{Path: filepath.Join(t.TempDir(), "state.db"), Now: newClock().Now})
	c1 := enrolled(t, r, "i1", "127.0.0.5")
	enrolled(t, r, "i2", "127.0.0.6")
	stuck, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	r.store.fail = func() error {
		if first.CompareAndSwap(false, true) { // only End's write sticks
			close(stuck)
			<-release
		}
		return nil
	}
	ended := make(chan error, 1)
	go func() { _, err := r.End(c1.CandidateID, "deleted"); ended <- err }()
	<-stuck // End holds its write in the "disk" now
	if a, err := r.Heartbeat(wire.Heartbeat{InstanceID: "i2", Seq: 1}); err != nil || a != wire.ActionNone {
		t.Errorf("heartbeat during a stuck write: %q %v", a, err)
	}
	if _, ok := r.Live("i1"); !ok {
		t.Error("a write not yet committed is visible")
	}
	if _, _, err := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: "i3"}); err != nil {
		t.Errorf("another candidate's change during a stuck write: %v", err)
	}
	second := make(chan struct{})
	go func() { r.End(c1.CandidateID, "again"); close(second) }()
	select {
	case <-second:
		t.Error("a second change of the same candidate did not wait for the first")
	case <-ended:
		t.Error("End returned while its write was stuck")
	default:
	}
	close(release)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	<-second
	if _, ok := r.Live("i1"); ok {
		t.Error("ended node still live after the write")
	}
}

// TestExpireInterrupted: an enrollment the last head left unfinished waits
// for its agent's retry for the rest of RetryWindow, then is handed back to
// be destroyed, once.
func TestExpireInterrupted(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "state.db")
	r := openAt(t, Config{Path: path, Now: clk.Now})
	c, tok := running(t, r, "i1", "127.0.0.5")
	r.Claim("i1", "127.0.0.5", tok, testKey)
	r.Close()
	clk.Add(time.Minute)
	r2 := openAt(t, Config{Path: path, Now: clk.Now})
	if got := r2.ExpireInterrupted(); len(got) != 0 {
		t.Errorf("expired %v inside the window", got)
	}
	clk.Add(RetryWindow - time.Minute)
	if got := r2.ExpireInterrupted(); len(got) != 1 || got[0] != c.CandidateID {
		t.Errorf("expired %v at the window's end, want %s", got, c.CandidateID)
	}
	if got := r2.ExpireInterrupted(); len(got) != 0 {
		t.Errorf("expired again: %v", got)
	}
	if _, err := r2.Claim("i1", "127.0.0.5", tok, testKey); err == nil {
		t.Error("a retry after the window resumed the enrollment")
	}
}

// TestPatchMoneySurvivesRestart: dph_total and rented_at set by a PATCH are
// in the store, not only in memory.
func TestPatchMoneySurvivesRestart(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "state.db")
	r := openAt(t, Config{Path: path, Now: clk.Now})
	c, _, _ := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	if _, err := r.Patch(c.CandidateID, wire.CandidatePatch{InstanceID: "i1", DPHTotal: 1.25}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	got, _ := openAt(t, Config{Path: path, Now: clk.Now}).Candidate(c.CandidateID)
	if got.DPHTotal != 1.25 || got.RentedAt == nil || !got.RentedAt.Equal(clk.Now()) {
		t.Errorf("after a restart dph_total %v rented_at %v", got.DPHTotal, got.RentedAt)
	}
}
