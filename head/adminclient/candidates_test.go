package adminclient

import (
	"errors"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestCreateAndList: Create's answer carries the candidate and its rental
// env (join token included), the head's provider is asked to rent it, and
// Candidates and Candidate show it.
func TestCreateAndList(t *testing.T) {
	h := newTestHead(t, nil)
	cr, err := h.c.Create(t.Context(), wire.CandidateRequest{NodeType: "cpu", InstanceID: "i-1", PublicIP: "127.0.3.1"})
	if err != nil {
		t.Fatal(err)
	}
	if cr.CandidateID == "" || cr.JoinToken == "" || cr.Env[wire.EnvJoinToken] != cr.JoinToken || cr.Env[wire.EnvInstanceID] != "i-1" || h.rent.rented != 1 {
		t.Fatalf("created %+v, rented %d", cr, h.rent.rented)
	}
	cs, err := h.c.Candidates(t.Context())
	if err != nil || len(cs) != 1 || cs[0].CandidateID != cr.CandidateID || cs[0].State != wire.StateRunning {
		t.Fatalf("Candidates = %+v, %v", cs, err)
	}
	c, err := h.c.Candidate(t.Context(), cr.CandidateID)
	if err != nil || c.CandidateID != cr.CandidateID || c.InstanceID != "i-1" {
		t.Errorf("Candidate = %+v, %v", c, err)
	}
}

// TestCreateRefused: a refusal names the route, the status and the head's
// answer ("admin METHOD PATH: HTTP N: ..."), as `head status` and the
// tools print it.
func TestCreateRefused(t *testing.T) {
	h := newTestHead(t, nil)
	_, err := h.c.Create(t.Context(), wire.CandidateRequest{NodeType: "gpu9"})
	if err == nil || !strings.HasPrefix(err.Error(), "admin POST /v1/candidates: HTTP 400: ") || !strings.Contains(err.Error(), "gpu9") {
		t.Errorf("Create(unknown type) = %v, want admin POST /v1/candidates: HTTP 400 naming the type", err)
	}
	if se := (*StatusError)(nil); !errors.As(err, &se) || se.Status != 400 {
		t.Errorf("Create(unknown type) = %#v, want a *StatusError of 400", err)
	}
	if _, err := h.c.Candidate(t.Context(), "c-nope"); err == nil || !strings.Contains(err.Error(), "admin GET /v1/candidates/c-nope: HTTP 404") {
		t.Errorf("Candidate(unknown) = %v, want HTTP 404", err)
	}
}

// TestPatch: a candidate made without a rental becomes running once an
// external provider says its instance and IP.
func TestPatch(t *testing.T) {
	h := newTestHead(t, nil)
	cr, err := h.c.Create(t.Context(), wire.CandidateRequest{NodeType: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.c.Patch(t.Context(), cr.CandidateID, wire.CandidatePatch{InstanceID: "i-2", PublicIP: "127.0.3.2"})
	if err != nil || c.State != wire.StateRunning || c.InstanceID != "i-2" || c.PublicIP != "127.0.3.2" {
		t.Errorf("Patch = %+v, %v", c, err)
	}
	if _, err := h.c.Patch(t.Context(), "c-nope", wire.CandidatePatch{HostID: "x"}); err == nil || !strings.Contains(err.Error(), "admin PATCH /v1/candidates/c-nope: HTTP 404") {
		t.Errorf("Patch(unknown) = %v, want HTTP 404", err)
	}
}

// TestEnd: End ends the candidate through the head's provider driver, with
// the reason the admin API records ("deleted"); an unknown one is a 404.
func TestEnd(t *testing.T) {
	h := newTestHead(t, nil)
	cr, err := h.c.Create(t.Context(), wire.CandidateRequest{NodeType: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.End(t.Context(), cr.CandidateID); err != nil {
		t.Fatal(err)
	}
	if c, _ := h.reg.Candidate(cr.CandidateID); c.State != wire.StateEnded || len(h.rent.ended) != 1 || h.rent.ended[0] != cr.CandidateID+":deleted" {
		t.Errorf("after End: %+v, provider ended %v", c, h.rent.ended)
	}
	if err := h.c.End(t.Context(), "c-nope"); err == nil || !strings.Contains(err.Error(), "admin DELETE /v1/candidates/c-nope: HTTP 404") {
		t.Errorf("End(unknown) = %v, want HTTP 404", err)
	}
}
