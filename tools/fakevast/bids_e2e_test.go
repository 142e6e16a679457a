package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// The reconcile loop's tick (its default, which `head serve` keeps): with
// an interruptible node type the leak sweep runs on every one.
const bidTick = 5 * time.Second

// TestBidsE2E is issue 31's "done" for interruptible node types, with the
// real head binary (`head serve --provider vast`), agents in containers
// and the fake vast API; min_workers 2 of a type that bids (cap $0.20/h,
// margin 10 %). It proves, in order:
//   - a bid that cannot start: the machine's min_bid rises above the
//     head's bid between its search and its create (SetMinBid, in front of
//     the second create); the head asks cancel_unavail, so vast answers
//     410 and makes no instance; the head rents another offer, and two
//     nodes enroll, each a bid under the cap;
//   - outbid: an enrolled node's instance is paused (Outbid); the head ends
//     it "outbid", destroys the paused instance and rents a replacement
//     within one reconcile tick (plus slack), without blocklisting the host;
//     the replacement enrolls;
//   - `head status` shows each rental's bid beside its offer's dph_total
//     at the minimum bid;
//   - a host's pending price increase is rejected (the default), shown in
//     `head status` and the log as rejected, and the node kept;
//   - at the end no instance is left stopped or paused (billing storage)
//     and every live instance belongs to a live candidate.
func TestBidsE2E(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := openFlow(ctx, t, "bids", time.Minute)
	f.vastCPU = `"gpu_name":"fake-cpu","interruptible":{"max_bid_dph":0.2,"margin":0.1}`
	// Heartbeats 5 s apart: a paused node is lost only after 15 s, so only
	// the sweep can end it within the bound below.
	f.heartbeat = 5
	// Another renter outbids the head on the second machine it creates on,
	// after the head's search: above the cap, so no later search offers it.
	var creates atomic.Int32
	var raised atomic.Int64
	f.wrap = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id, ok := askID(r); ok && creates.Add(1) == 2 {
				f.fake.SetMinBid(id, 0.5)
				raised.Store(id)
			}
			h.ServeHTTP(w, r)
		})
	}
	f.enroll(ctx, fakevast.DefaultOffers(8))

	// The bid that could not start: the head asks cancel_unavail, so vast
	// answers 410 and makes no instance (nothing bills storage).
	offer := raised.Load()
	if offer == 0 {
		t.Fatal("no create on the outbid offer")
	}
	if in := f.instance(func(in fakevast.Instance) bool { return in.Offer.ID == offer }); in != nil {
		t.Errorf("instance %d made on offer %d (min_bid raised, stopped %v): want none (410)", in.ID, offer, in.Stopped)
	}
	for _, in := range f.fake.Live() {
		if in.Offer.ID == offer {
			t.Errorf("instance %d on the outbid offer %d is rented", in.ID, offer)
		}
		if !(in.Bid > 0 && in.Bid <= 0.2) {
			t.Errorf("instance %d bids %g, want a bid ≤ 0.2", in.ID, in.Bid)
		}
	}

	// Outbid.
	cs := f.candidates()
	victim := *find(cs, func(c wire.Candidate) bool { return c.State == wire.StateEnrolled })
	vid, _ := strconv.ParseInt(victim.InstanceID, 10, 64)
	before := map[int64]bool{}
	for _, in := range f.fake.AllInstances() {
		before[in.ID] = true
	}
	outbid := time.Now()
	if err := f.fake.Outbid(ctx, vid); err != nil {
		t.Fatal(err)
	}
	var replaced time.Time
	f.waitEvent("the outbid instance destroyed and another rented", time.Minute, func() bool {
		for _, in := range f.fake.AllInstances() {
			if !before[in.ID] && replaced.IsZero() {
				replaced = in.Created
			}
		}
		return !f.live(victim.InstanceID) && !replaced.IsZero()
	})
	destroyed := f.instance(func(in fakevast.Instance) bool { return in.ID == vid }).DestroyedAt
	const slack = 3 * time.Second // a loaded 2-core machine's timers and the calls themselves
	t.Logf("outbid: paused instance %d destroyed %v and a replacement created %v after the pause (bound: one tick, %v, + %v)",
		vid, destroyed.Sub(outbid).Round(10*time.Millisecond), replaced.Sub(outbid).Round(10*time.Millisecond), bidTick, slack)
	if d := destroyed.Sub(outbid); d > bidTick+slack {
		t.Errorf("the paused instance was destroyed %v after the outbid, past one tick", d)
	}
	if d := replaced.Sub(outbid); d > bidTick+slack {
		t.Errorf("the replacement was created %v after the outbid, past one tick", d)
	}
	if c := find(f.candidates(), func(c wire.Candidate) bool { return c.CandidateID == victim.CandidateID }); c == nil || c.State != wire.StateEnded || c.Reason != "outbid" {
		t.Errorf("the outbid node: %+v, want ended outbid", c)
	}
	if ok, bl := f.blocklisted(victim.HostID); ok {
		t.Errorf("host %s blocklisted for an outbid: %+v", victim.HostID, bl)
	}
	f.waitFor("2 enrolled again", 3*time.Minute, func(cs []wire.Candidate) bool { return count(cs, wire.StateEnrolled) >= 2 && inflight(cs) == 0 })

	// head status: each rental's bid and its offer's dph_total at the
	// minimum bid (a bid search's; no storage cost on these offers).
	status := f.status(ctx)
	if !strings.Contains(status, "BID $/H") || !strings.Contains(status, "OFFER AT MIN BID $/H") {
		t.Errorf("head status has no bid table:\n%s", status)
	}
	live := f.fake.Live()
	for _, in := range live {
		if l := statusRow(status, in.ID); !strings.Contains(l, fmt.Sprintf("$%.3f", in.Bid)) || !strings.Contains(l, fmt.Sprintf("$%.3f", in.Offer.MinBid)) {
			t.Errorf("head status row of %d is %q, want its bid $%.3f and the offer at its min bid $%.3f", in.ID, l, in.Bid, in.Offer.MinBid)
		}
	}

	// A pending price increase: rejected by default, the node kept.
	keep := live[0]
	if _, err := f.fake.RaisePrice(keep.ID, fakevast.Rise{GPUDPH: 0.3}); err != nil {
		t.Fatal(err)
	}
	f.waitEvent("the price increase answered", 2*time.Minute, func() bool {
		inc := f.fake.Increases()
		return len(inc) == 1 && inc[0].Answer != ""
	})
	if inc := f.fake.Increases(); inc[0].Answer != "rejected" {
		t.Errorf("the price increase was %s, want rejected", inc[0].Answer)
	}
	if l := statusRow(f.status(ctx), keep.ID); !strings.Contains(l, "→ $0.300/h "+wire.PriceRejected) {
		t.Errorf("head status row of %d is %q, want the increase to $0.300/h rejected", keep.ID, l)
	}
	if !f.live(strconv.FormatInt(keep.ID, 10)) {
		t.Errorf("instance %d ended for a rejected price increase", keep.ID)
	}
	logged := false
	for _, l := range strings.Split(f.logs.String(), "\n") {
		logged = logged || (strings.Contains(l, "a host raised its price") && strings.Contains(l, "action="+wire.PriceRejected))
	}
	if !logged {
		t.Error("the head did not log the rejected price increase")
	}

	// Nothing paused or stopped left billing; nothing leaked.
	for _, in := range f.fake.Live() {
		if in.Stopped || in.Outbid || in.Vanished != "" {
			t.Errorf("instance %d left rented stopped (stopped %v, outbid %v, %q)", in.ID, in.Stopped, in.Outbid, in.Vanished)
		}
	}
	f.checkNoLeak("at the end")
	calls, limited := f.fake.Stats()
	t.Logf("vast API calls %v, 429s %d", calls, limited)
}

// TestContractEndE2E is issue 31's "done" for contract ends, with the
// real head binary, agents in containers and the fake vast API: the
// cheapest offer's contract ends in 30 minutes (inside the default
// replace_before_end_s, 2 h). It proves that `head status` shows the end
// date, that a replacement is rented before the old rental is destroyed
// and enrolls while the old node still runs, and that the old node is then
// ended contract_end and its instance destroyed, its host not
// blocklisted, two nodes enrolled and nothing leaked.
func TestContractEndE2E(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := openFlow(ctx, t, "contract", time.Minute)
	offers := fakevast.DefaultOffers(6)
	end := time.Now().Add(30 * time.Minute).Truncate(time.Second)
	offers[0].EndDate = float64(end.Unix())
	f.enroll(ctx, offers)
	old := f.instance(func(in fakevast.Instance) bool { return in.Offer.ID == offers[0].ID })
	if old == nil {
		t.Fatalf("offer %d was not rented", offers[0].ID)
	}
	oldID := strconv.FormatInt(old.ID, 10)
	known := map[string]bool{}
	for _, c := range f.candidates() {
		known[c.CandidateID] = true
	}
	oldCand := find(f.candidates(), func(c wire.Candidate) bool { return c.InstanceID == oldID })
	if oldCand == nil {
		t.Fatalf("no candidate of instance %d", old.ID)
	}
	if l := statusRow(f.status(ctx), old.ID); !strings.Contains(l, end.UTC().Format(time.RFC3339)) {
		t.Errorf("head status row of %d is %q, want its contract's end %s", old.ID, l, end.UTC().Format(time.RFC3339))
	}

	// The replacement enrolls while the old node still runs.
	var rep *wire.Candidate
	f.waitFor("a replacement enrolled beside the ending node", 3*time.Minute, func(cs []wire.Candidate) bool {
		o := find(cs, func(c wire.Candidate) bool { return c.CandidateID == oldCand.CandidateID })
		if o == nil || o.State != wire.StateEnrolled {
			t.Fatalf("the ending node is %+v before its replacement enrolled", o)
		}
		rep = find(cs, func(c wire.Candidate) bool { return c.State == wire.StateEnrolled && !known[c.CandidateID] })
		return rep != nil
	})
	f.waitFor("the ending node ended", time.Minute, func(cs []wire.Candidate) bool {
		o := find(cs, func(c wire.Candidate) bool { return c.CandidateID == oldCand.CandidateID })
		return o.State == wire.StateEnded && !f.live(oldID)
	})
	if o := find(f.candidates(), func(c wire.Candidate) bool { return c.CandidateID == oldCand.CandidateID }); o.Reason != "contract_end" {
		t.Errorf("the ending node ended %q, want contract_end", o.Reason)
	}
	old = f.instance(func(in fakevast.Instance) bool { return in.ID == old.ID })
	if in := f.instance(func(in fakevast.Instance) bool { return strconv.FormatInt(in.ID, 10) == rep.InstanceID }); !in.Created.Before(old.DestroyedAt) {
		t.Errorf("the replacement %d was created %v, after the old rental was destroyed (%v)", in.ID, in.Created, old.DestroyedAt)
	} else {
		t.Logf("replacement %d created %v before the old rental %d was destroyed", in.ID, old.DestroyedAt.Sub(in.Created).Round(time.Second), old.ID)
	}
	if ok, bl := f.blocklisted(oldCand.HostID); ok {
		t.Errorf("host %s blocklisted for a contract's end: %+v", oldCand.HostID, bl)
	}
	if n := count(f.candidates(), wire.StateEnrolled); n < 2 {
		t.Errorf("%d enrolled after the contract's end, want 2", n)
	}
	f.checkNoLeak("after the contract's end")
}

// enroll serves the fake with offers, starts `head serve` and waits for
// its 2 nodes (min_workers) to enroll; the logs are printed if the test
// fails.
func (f *flow) enroll(ctx context.Context, offers []fakevast.Offer) {
	f.t.Helper()
	f.setup(ctx, f.serveFake(fakevast.Config{Key: e2eKey, Offers: offers, StartDelay: time.Second, MinInterval: 50 * time.Millisecond}), f.img)
	f.start()
	f.t.Cleanup(func() {
		if f.t.Failed() {
			f.t.Logf("logs:\n%s", tail(f.logs.String(), 8000))
		}
	})
	f.waitFor("2 enrolled nodes", 4*time.Minute, func(cs []wire.Candidate) bool { return count(cs, wire.StateEnrolled) >= 2 && inflight(cs) == 0 })
}

// instance is the fake's first instance (live or not) that ok takes, or nil.
func (f *flow) instance(ok func(fakevast.Instance) bool) *fakevast.Instance {
	for _, in := range f.fake.AllInstances() {
		if ok(in) {
			return &in
		}
	}
	return nil
}

// askID is the offer a create request (PUT /api/v0/asks/{id}/) names.
func askID(r *http.Request) (int64, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v0/asks/")
	if r.Method != http.MethodPut || !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(strings.TrimSuffix(rest, "/"), 10, 64)
	return id, err == nil
}

// status is `head status` of the running head.
func (f *flow) status(ctx context.Context) string {
	f.t.Helper()
	out, err := f.run(ctx, "status", "--state", f.state)
	if err != nil {
		f.t.Fatalf("head status: %v\n%s", err, out)
	}
	return string(out)
}

// statusRow is the row of instance id in the terms table of `head status`
// (the lines after its RENTAL header).
func statusRow(out string, id int64) string {
	_, table, _ := strings.Cut(out, "\nRENTAL ")
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, strconv.FormatInt(id, 10)+" ") {
			return l
		}
	}
	return ""
}
