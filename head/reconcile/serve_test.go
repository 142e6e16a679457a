package reconcile

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
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

// TestStartServeWarnsOfLeftoverTable: with the firewall off, a table left
// by an earlier run with it on (a crashed head) still drops ports A and B
// for everyone but its stale IPs: the operator is told at start. The table
// is not removed: it may be another head's.
func TestStartServeWarnsOfLeftoverTable(t *testing.T) {
	for _, present := range []bool{true, false} {
		reg, _, h := newAdmin(t)
		var logs bytes.Buffer
		var scripts []string
		nft := func(_ context.Context, s string) error {
			scripts = append(scripts, s)
			if !present {
				return errors.New("no such table")
			}
			return nil
		}
		stop, err := StartServe(context.Background(), ServeConfig{Admin: h, End: reg.End, StateDir: t.TempDir(), Nft: nft,
			Log: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		stop()
		if got := strings.Contains(logs.String(), "still guards"); got != present {
			t.Errorf("table present %v: warned %v:\n%s", present, got, logs.String())
		}
		for _, s := range scripts {
			if strings.Contains(s, "delete") || strings.Contains(s, "add") || strings.Contains(s, "flush") {
				t.Errorf("firewall off changed nftables: %q", s)
			}
		}
	}
}
