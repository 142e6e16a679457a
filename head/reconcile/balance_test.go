package reconcile

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// TestNoBalanceNeverBlocklists: when the account runs out of money vast
// stops every instance; the loop ends each node no_balance, blocklists no
// host (credit running out would otherwise blocklist the whole cluster),
// counts no failure, rents nothing while the provider halts for billing,
// and logs the halt with what to do (head up shows the head's warnings).
func TestNoBalanceNeverBlocklists(t *testing.T) {
	e := newVastEnvWith(t, fakevast.DefaultOffers(6), vast.OfferSpec{MaxDPH: 0.5}, nil)
	fc := e.enrolled(t, "n1", "n2", "n3")
	logs := &rvtest.Buffer{}
	l := New(Config{Cluster: fc, Rentals: e.prov, Blocklist: e.block, Status: e.prov.Status,
		NodeTypes: map[string]wire.NodeType{"cpu": {MinWorkers: 3, MaxWorkers: 3}}, Now: e.clk.Now, Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err := e.fake.SetCredit(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	res, err := l.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range fc.cands[:3] {
		if res.Ended[c.CandidateID] != ReasonNoBalance {
			t.Errorf("%s ended %q, want %s", c.CandidateID, res.Ended[c.CandidateID], ReasonNoBalance)
		}
		if _, blocked := e.block.Blocked(c.HostID); blocked {
			t.Errorf("host %s blocklisted for the account's balance", c.HostID)
		}
	}
	e.clk.Add(5 * time.Second)
	if res, _ = l.Tick(context.Background()); res.Created["cpu"] != 0 {
		t.Errorf("created %v with no money on the account, want none", res.Created)
	}
	if !strings.Contains(logs.String(), "renting halted") || !strings.Contains(logs.String(), "Add credit") {
		t.Errorf("the log does not say renting halted for the balance and what to do:\n%s", logs.String())
	}
}
