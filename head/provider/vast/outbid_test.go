package vast

import (
	"context"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

func byCandidate(t *testing.T, p *Provider) map[string]provider.Rental {
	t.Helper()
	rs, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]provider.Rental{}
	for _, r := range rs {
		out[r.CandidateID] = r
	}
	return out
}

// TestOutbidReadFromContractStates: a bid's fate comes from cur_state,
// intended_status and next_state, all "stopped" when vast pauses it: a
// bid outbid while still starting (actual_status still loading, never
// "stopped") ends outbid at once instead of waiting out the enroll
// timeout; one outbid after it ran shows actual_status exited and still
// ends outbid (EndNow: the loop blocklists no host for it), while an
// on-demand rental whose container exited stays a vanished rental, not
// an outbid.
func TestOutbidReadFromContractStates(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, fakevast.DefaultOffers(4), nil) // StartDelay 10 s
	p := e.bidProvider(t, wire.BidPolicy{MaxBidDPH: 0.5}, func(s *Settings) {
		s.NodeTypes["od"] = OfferSpec{GPUName: "fake-cpu", MaxDPH: 0.5}
	})
	ran, err := p.Rent(ctx, rentReq("ran"))
	if err != nil {
		t.Fatal(err)
	}
	od := rentReq("od")
	od.NodeType = "od"
	ondemand, err := p.Rent(ctx, od)
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Wait()
	e.clock.Add(11 * time.Second)
	if g := byCandidate(t, p); !g["ran"].Running || !g["od"].Running {
		t.Fatalf("not running after the start delay: %+v", g)
	}
	starting, err := p.Rent(ctx, rentReq("starting"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []provider.Rental{ran, starting} {
		if err := e.fake.Outbid(ctx, instanceID(t, r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.fake.Vanish(ctx, instanceID(t, ondemand), "exited"); err != nil {
		t.Fatal(err)
	}
	in, err := e.client.ShowInstance(ctx, instanceID(t, starting))
	if err != nil || in.Status() == "stopped" || !in.Paused() {
		t.Fatalf("vast shows the starting outbid bid as %q (paused %v, %v); want not stopped, paused", in.Status(), in.Paused(), err)
	}
	g := byCandidate(t, p)
	if r := g["starting"]; r.EndNow != EndOutbid || r.Vanished != "" {
		t.Errorf("outbid while starting: EndNow %q Vanished %q, want outbid, not vanished", r.EndNow, r.Vanished)
	}
	if r := g["ran"]; r.EndNow != EndOutbid || r.Vanished != "exited" {
		t.Errorf("outbid after it ran: EndNow %q Vanished %q, want outbid (exited)", r.EndNow, r.Vanished)
	}
	if r := g["od"]; r.EndNow != "" || r.Vanished != "exited" {
		t.Errorf("on-demand exited: EndNow %q Vanished %q, want no EndNow, exited", r.EndNow, r.Vanished)
	}
}
