package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestStartServe: the loop starts at once (min_workers rented through the
// admin handler, reasons kept through End) and stop returns; with the
// firewall off nothing touches nftables.
func TestStartServe(t *testing.T) {
	reg, rr, h := newAdmin(t)
	stop, err := StartServe(context.Background(), ServeConfig{Admin: h, End: reg.End,
		NodeTypes: map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 2}}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(reg.Candidates()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if n := len(reg.Candidates()); n != 2 || len(rr.rented) != 2 {
		t.Errorf("candidates %d, rented %d; want 2 and 2", n, len(rr.rented))
	}
}
