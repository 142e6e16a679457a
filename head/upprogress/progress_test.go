package upprogress

import (
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestProgressLines: a rental's line says its state once per change, with
// what is known of it; the summary counts states and prices live rentals only.
func TestProgressLines(t *testing.T) {
	seen := map[string]string{}
	cands := []wire.Candidate{{CandidateID: "c-1", NodeType: "gpu", State: "enrolled", InstanceID: "7", PublicIP: "198.51.100.7", DPHTotal: 0.25},
		{CandidateID: "c-2", NodeType: "gpu", State: "ended", Reason: "security_check", DPHTotal: 0.5}, {CandidateID: "c-3", NodeType: "gpu", State: "pending"}}
	got := changes(seen, cands)
	want := []string{"rental c-1 (gpu): enrolled (instance 7, $0.250/h, ip 198.51.100.7)", "rental c-2 (gpu): ended ($0.500/h, reason security_check)", "rental c-3 (gpu): pending"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if again := changes(seen, cands); len(again) != 0 {
		t.Errorf("unchanged states printed again: %v", again)
	}
	// $/h: the live rentals only (c-2 ended).
	line := summaryLine(cands, []wire.Node{{Ray: wire.RayStatus{State: "running"}}}, rayhead.Status{State: "running", Restarts: 2})
	if line != "rentals: 1 ended, 1 enrolled, 1 pending · nodes: 1 (1 with Ray running) · Ray head: running (2 restarts) · $0.250/h" {
		t.Errorf("summary %q", line)
	}
	if line := summaryLine(cands[2:], nil, rayhead.Status{}); strings.Contains(line, "$") {
		t.Errorf("unpriced summary shows a price: %q", line)
	}
}
