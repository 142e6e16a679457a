package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestStartServe: the loop starts at once (min_workers rented through the
// admin API, reasons kept through End) and stop returns.
func TestStartServe(t *testing.T) {
	reg, rr, adm := newAdmin(t)
	stop, err := StartServe(context.Background(), ServeConfig{Admin: adm,
		NodeTypes: map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 2}}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rvtest.Until(10*time.Second, func() bool { return len(reg.Candidates()) >= 2 })
	stop()
	if n := len(reg.Candidates()); n != 2 || len(rr.rented) != 2 {
		t.Errorf("candidates %d, rented %d; want 2 and 2", n, len(rr.rented))
	}
}
