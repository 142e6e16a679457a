package enroll

import (
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestRejectedKeepsReport proves a candidate rejected after proving its
// token keeps what its agent reported (checks, GPUs, versions) for `head
// node`, with each check detail cut to wire.ReportDetailMax bytes on a rune
// boundary; an enrolled one keeps nothing (its guest API tells).
func TestRejectedKeepsReport(t *testing.T) {
	h := newHead(t)
	c, tok, a := h.candidate(t, "inst-rep", "127.0.0.71", "gpu1", fakeagent.Answer)
	req := a.Request("inst-rep", tok.Reveal(), 1)
	long := strings.Repeat("é", wire.ReportDetailMax) // 2 bytes a rune: the cut falls mid-rune
	req.Checks.Shm = wire.Check{OK: false, Detail: long}
	if st, body := h.post(t, "127.0.0.71", req); st != 403 || !strings.Contains(body, wire.ReasonSecurityCheck) {
		t.Fatalf("post: %d %s, want 403 %s", st, body, wire.ReasonSecurityCheck)
	}
	got, _ := h.reg.Candidate(c.CandidateID)
	r := got.Reported
	if r == nil {
		t.Fatal("rejected candidate has no report")
	}
	if r.Checks.Shm.OK || r.GPUs != 1 || r.RayVersion != req.RayVersion || len(r.GPUModels) != 1 {
		t.Errorf("report = %+v, want the request's checks, 1 GPU and its versions", r)
	}
	if d := r.Checks.Shm.Detail; len(d) > wire.ReportDetailMax || len(d) < wire.ReportDetailMax-1 || !strings.HasPrefix(long, d) {
		t.Errorf("shm detail kept %d bytes, want a rune-boundary cut at ≤ %d", len(d), wire.ReportDetailMax)
	}

	ok, tok2, a2 := h.candidate(t, "inst-ok2", "127.0.0.72", "gpu1", fakeagent.Answer)
	if st, body := h.post(t, "127.0.0.72", a2.Request("inst-ok2", tok2.Reveal(), 1)); st != 200 {
		t.Fatalf("enroll: %d %s", st, body)
	}
	if got, _ := h.reg.Candidate(ok.CandidateID); got.Reported != nil {
		t.Error("an enrolled candidate kept a report")
	}
}
