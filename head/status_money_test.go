package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestStatusMoney: head status shows each rental's $/h and cost, a failed
// candidate's cost too, and the cluster's $/h per node type and its spend.
func TestStatusMoney(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	cands := []wire.Candidate{
		{CandidateID: "c-1", NodeType: "a100", State: wire.StateEnrolled, InstanceID: "11", DPHTotal: 1.2, RentedAt: at(2 * time.Hour), CreatedAt: now.Add(-2 * time.Hour)},
		{CandidateID: "c-2", NodeType: "cpu", State: wire.StateRunning, InstanceID: "12", DPHTotal: 0.1, RentedAt: at(time.Hour), CreatedAt: now.Add(-time.Hour)},
		// Failed after 30 min at $0.50/h: it cost $0.25 and bills no more.
		{CandidateID: "c-3", NodeType: "a100", State: wire.StateEnded, Reason: "port_check", InstanceID: "13", DPHTotal: 0.5,
			RentedAt: at(time.Hour), CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-30 * time.Minute)},
	}
	var b bytes.Buffer
	printStatus(&b, cands, nil, now)
	got := b.String()
	for _, want := range []string{"$/H", "COST", "$1.200", "$2.4000", "$0.1000", "$0.500", "$0.2500", "port_check",
		"cluster $1.300/h", "a100 $1.200/h", "cpu $0.100/h", "spent so far $2.7500"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
}
