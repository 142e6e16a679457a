package vast

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// TestStoppedOnDemandReadFromBalance: an on-demand rental vast shows
// stopped is never the host's doing: with money on the account (read by
// the CLI's show user call, GET /api/v0/users/current) it ends stopped (a
// user's stop); once the account has none, vast stops every instance and
// each ends no_balance, renting halts (billing) and the halt says the
// balance is the cause and what to do. None of it is a Vanished-only
// rental the loop would blocklist a host for.
func TestStoppedOnDemandReadFromBalance(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakevast.DefaultOffers(6), nil)
	p := e.provider(t, "c1", nil)
	var ids []string
	for _, c := range []string{"a", "b", "c"} {
		r, err := p.Rent(ctx, rentReq(c))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.InstanceID)
	}
	e.fake.Wait()
	e.clock.Add(11 * time.Second)
	a, _ := parseID(ids[0])
	if err := e.fake.Vanish(ctx, a, "stopped"); err != nil { // someone stopped it
		t.Fatal(err)
	}
	g := byCandidate(t, p)
	if g["a"].EndNow != EndStopped || g["b"].EndNow != "" || g["c"].EndNow != "" {
		t.Errorf("a user's stop: EndNow a %q b %q c %q, want stopped for a only", g["a"].EndNow, g["b"].EndNow, g["c"].EndNow)
	}
	if st := p.Status(); st.Halted != "" {
		t.Errorf("halted %q with money on the account", st.Halted)
	}
	calls, _ := e.fake.Stats()
	if calls["GET /api/v0/users/current"] != 1 {
		t.Errorf("account reads %v, want one GET /api/v0/users/current (the CLI's show user)", calls)
	}
	if err := e.fake.SetCredit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(accountEvery)
	g = byCandidate(t, p)
	if g["b"].EndNow != EndNoBalance || g["c"].EndNow != EndNoBalance {
		t.Errorf("no money: EndNow b %q c %q, want %s", g["b"].EndNow, g["c"].EndNow, EndNoBalance)
	}
	st := p.Status()
	if st.Halted != "billing" || st.Until == nil || !strings.Contains(st.Detail, "no money left (balance $0.00, credit $0.00)") || !strings.Contains(st.Detail, "Add credit") {
		t.Errorf("status %+v, want billing halted, naming the balance and what to do", st)
	}
	if _, err := p.Rent(ctx, rentReq("d")); err == nil {
		t.Error("rented with no money on the account")
	}
}

// TestStoppedOnPurposeFields: a stop is read from any field vast sets for
// one (actual_status stopped, the contract's cur_state stopped, the
// container's intended_status stopped), never from a failing host's
// offline or exited with the contract still running.
func TestStoppedOnPurposeFields(t *testing.T) {
	st := func(s string) *string { return &s }
	for _, c := range []struct {
		in   Instance
		want bool
	}{
		{Instance{ActualStatus: st("stopped"), CurState: "running", IntendedStatus: "running"}, true},
		{Instance{ActualStatus: st("exited"), CurState: "stopped", IntendedStatus: "running", NextState: "stopped"}, true},
		{Instance{ActualStatus: nil, CurState: "running", IntendedStatus: "stopped"}, true},
		{Instance{ActualStatus: st("exited"), CurState: "running", IntendedStatus: "running", NextState: "running"}, false},
		{Instance{ActualStatus: st("offline"), CurState: "running", IntendedStatus: "running"}, false},
	} {
		if got := stoppedOnPurpose(c.in); got != c.want {
			t.Errorf("status %q cur_state %q intended %q: %v, want %v", c.in.Status(), c.in.CurState, c.in.IntendedStatus, got, c.want)
		}
	}
}
