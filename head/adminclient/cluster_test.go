package adminclient

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestNodesAndSnapshot: an enrolled instance is listed by Nodes, and
// Snapshot holds both lists.
func TestNodesAndSnapshot(t *testing.T) {
	h := newTestHead(t, nil)
	if ns, err := h.c.Nodes(t.Context()); err != nil || len(ns) != 0 {
		t.Fatalf("Nodes before any enrollment = %+v, %v", ns, err)
	}
	c := h.enroll(t, "i-1", "127.0.3.1")
	ns, err := h.c.Nodes(t.Context())
	if err != nil || len(ns) != 1 || ns[0].InstanceID != "i-1" || ns[0].CandidateID != c.CandidateID || ns[0].State != wire.StateEnrolled {
		t.Fatalf("Nodes = %+v, %v", ns, err)
	}
	s, err := h.c.Snapshot(t.Context())
	if err != nil || len(s.Candidates) != 1 || s.Candidates[0].State != wire.StateEnrolled || len(s.Nodes) != 1 || s.Nodes[0].InstanceID != "i-1" {
		t.Errorf("Snapshot = %+v, %v", s, err)
	}
}

// TestSnapshotNoHead: with no head on the socket, Snapshot fails with the
// route it could not read.
func TestSnapshotNoHead(t *testing.T) {
	c := Unix(t.TempDir()+"/admin.sock", time.Second)
	_, err := c.Snapshot(t.Context())
	if err == nil || !strings.HasPrefix(err.Error(), "admin GET /v1/candidates: ") {
		t.Errorf("Snapshot without a head = %v, want admin GET /v1/candidates: ...", err)
	}
	if se := (*StatusError)(nil); errors.As(err, &se) {
		t.Errorf("no head is a *StatusError: %v", err)
	}
}

// TestBlocklist: a blocklisted host is listed with its class.
func TestBlocklist(t *testing.T) {
	h := newTestHead(t, nil)
	if bl, err := h.c.Blocklist(t.Context()); err != nil || len(bl) != 0 {
		t.Fatalf("empty Blocklist = %+v, %v", bl, err)
	}
	h.block.Add("h-9", wire.BlockNetwork, "port check failed")
	bl, err := h.c.Blocklist(t.Context())
	if err != nil || len(bl) != 1 || bl[0].HostID != "h-9" || bl[0].Class != wire.BlockNetwork {
		t.Errorf("Blocklist = %+v, %v", bl, err)
	}
}

// TestProvider: the provider's status as the head reports it, and kind
// "none" for a head without a built-in provider.
func TestProvider(t *testing.T) {
	if st, err := newTestHead(t, nil).c.Provider(t.Context()); err != nil || st.Kind != "none" || st.Halted != "" {
		t.Errorf("Provider without one = %+v, %v", st, err)
	}
	halted := wire.ProviderStatus{Kind: "vast", Halted: "billing", Detail: "add credit"}
	st, err := newTestHead(t, func() wire.ProviderStatus { return halted }).c.Provider(t.Context())
	if err != nil || st.Kind != "vast" || st.Halted != "billing" || st.Detail != "add credit" {
		t.Errorf("Provider = %+v, %v", st, err)
	}
}

// TestMetrics: the Prometheus text, as is.
func TestMetrics(t *testing.T) {
	h := newTestHead(t, nil)
	h.m.Heartbeat()
	text, err := h.c.Metrics(t.Context())
	if err != nil || !strings.Contains(text, "rayvast_heartbeats_total 1\n") {
		t.Errorf("Metrics = %q, %v", text, err)
	}
}
