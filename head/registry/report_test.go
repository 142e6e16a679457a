package registry

import (
	"path/filepath"
	"testing"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestReportSurvivesRestartAndEnd proves a rejected agent's report is
// durable: it is still on the candidate after the candidate is ended and
// the registry reopened from disk.
func TestReportSurvivesRestartAndEnd(t *testing.T) {
	clk := newClock()
	path := filepath.Join(t.TempDir(), "state.db")
	r, err := Open(Config{Path: path, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	c, tok := running(t, r, "i-rep", "127.0.0.9")
	cl, err := r.Claim("i-rep", "127.0.0.9", tok, testKey)
	if err != nil {
		t.Fatal(err)
	}
	rep := wire.CheckReport{Checks: wire.Checks{Shm: wire.Check{OK: false, Detail: "/dev/shm is 64 MiB"}}, GPUs: 2,
		GPUModels: []string{"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"}, RayVersion: "2.53.0"}
	if err := r.Report(cl, rep); err != nil {
		t.Fatal(err)
	}
	r.Release(cl)
	if _, err := r.End(c.CandidateID, wire.ReasonSecurityCheck); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r2 := openAt(t, Config{Path: path, Now: clk.Now})
	got, ok := r2.Candidate(c.CandidateID)
	if !ok || got.Reported == nil {
		t.Fatalf("after reopen: candidate %v, report %v", ok, got.Reported)
	}
	if got.State != wire.StateEnded || got.Reported.Checks.Shm.Detail != "/dev/shm is 64 MiB" || got.Reported.GPUs != 2 || len(got.Reported.GPUModels) != 2 {
		t.Errorf("after reopen: %+v / %+v", got, got.Reported)
	}
}
