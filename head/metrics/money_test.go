package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestMoneyMetrics: /metrics shows $/h per billing rental, per node type,
// for the cluster, and the spend so far with the ended candidates' cost.
func TestMoneyMetrics(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	cands := []wire.Candidate{
		{CandidateID: "c-1", NodeType: "gpu", State: wire.StateEnrolled, InstanceID: "1", DPHTotal: 0.4, RentedAt: at(time.Hour)},
		{CandidateID: "c-2", NodeType: "gpu", State: wire.StatePending},
		{CandidateID: "c-3", NodeType: "gpu", State: wire.StateEnded, InstanceID: "3", DPHTotal: 0.2, RentedAt: at(2 * time.Hour), UpdatedAt: now.Add(-time.Hour)},
		{CandidateID: "c-4", NodeType: "cpu", State: wire.StateDestroyRequested, InstanceID: "4", DPHTotal: 0.1, RentedAt: at(30 * time.Minute)},
	}
	m := &Metrics{Now: func() time.Time { return now }}
	var b strings.Builder
	if err := m.Write(&b, cands, nil); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		`rayvast_rental_dph{candidate_id="c-1",instance_id="1",node_type="gpu",state="enrolled"} 0.4`,
		`rayvast_rental_dph{candidate_id="c-4",instance_id="4",node_type="cpu",state="destroy_requested"} 0.1`,
		`rayvast_node_type_dph{node_type="cpu"} 0.1`, `rayvast_node_type_dph{node_type="gpu"} 0.4`,
		"rayvast_cluster_dph 0.5\n", "rayvast_spend_dollars 0.650000\n", // 0.4 + 0.2 + 0.05
	} {
		if !strings.Contains(got, want) {
			t.Errorf("metrics lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, `candidate_id="c-3"`) || strings.Contains(got, `candidate_id="c-2"`) {
		t.Error("an ended or unrented candidate is shown as billing")
	}
}
