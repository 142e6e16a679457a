package vast

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// off is a good machine's offer (fakevast fills the quality fields).
func off(id, machine, host int64, dph float64) fakevast.Offer {
	return fakevast.Offer{ID: id, MachineID: machine, HostID: host, GPUName: "fake-cpu", DPHTotal: dph, Rentable: true, Verified: true, DirectPortCount: 100}
}

func offersOf(e *env) map[int64]int {
	n := map[int64]int{}
	for _, in := range e.fake.AllInstances() {
		n[in.Offer.ID]++
	}
	return n
}

// TestStoppedCreateDestroyed: a create vast answers success false with a
// new_contract (the instance started stopped, and bills its storage; here
// a vast that ignores cancel_unavail) is destroyed at once, its machine is
// skipped (its other offer too), and the rental comes from another
// machine.
func TestStoppedCreateDestroyed(t *testing.T) {
	offers := []fakevast.Offer{off(1, 11, 101, 0.10), off(2, 12, 102, 0.11), off(3, 11, 101, 0.12), off(4, 13, 103, 0.13)}
	offers[0].StartsStopped = true
	e := newEnvWith(t, offers, nil, func(c *fakevast.Config) { c.IgnoreCancelUnavail = true })
	p := e.provider(t, "c1", nil)
	ctx := context.Background()
	r, err := p.Rent(ctx, rentReq("a"))
	if err != nil || r.HostID != "102" {
		t.Fatalf("rent = %+v, %v; want host 102 (offer 1 started stopped)", r, err)
	}
	all := e.fake.AllInstances()
	if len(all) != 2 || all[0].Offer.ID != 1 || !all[0].Destroyed {
		t.Fatalf("instances = %+v; want offer 1's stopped instance destroyed, then offer 2's", all)
	}
	b, err := p.Rent(ctx, rentReq("b"))
	if err != nil || b.HostID != "103" {
		t.Errorf("second rent = %+v, %v; want host 103: machine 11 (offer 3) is skipped", b, err)
	}
	e.clock.Add(time.Minute) // a fresh search must leave machine 11 out too
	c, err := p.Rent(ctx, rentReq("c"))
	if err == nil {
		t.Errorf("third rent = %+v; want no offer (12 and 13 hold rentals, 11 skipped)", c)
	}
	if n := offersOf(e); n[3] != 0 {
		t.Errorf("offer 3 on the skipped machine was created %d times", n[3])
	}
	if !strings.Contains(e.logs.String(), "started the instance stopped") {
		t.Errorf("log does not say why: %s", e.logs.String())
	}
}

// TestVastErrorAnswers: each of vast's error answers gets its reaction: an
// offer no longer available (410) or on a host that blacklisted the
// account (400 invalid_args) is skipped (the host's other machines too)
// and another rented; a refused key (404 auth_error), a billing refusal
// (400 invalid_args) and a retired endpoint (410 deprecated_endpoint) stop
// renting with a message saying so, shown in Status, and no further
// request goes out for it.
func TestVastErrorAnswers(t *testing.T) {
	type tc struct {
		name   string
		offers func([]fakevast.Offer)
		fake   func(*fakevast.Config)
		host   string // the host rented; "" = the rent fails
		err    string // in the error when it fails
		halted string
	}
	for _, c := range []tc{
		{name: "410 no longer available", offers: func(o []fakevast.Offer) { o[0].Unavailable = true }, host: "102"},
		{name: "400 host blacklisted the account", offers: func(o []fakevast.Offer) { o[0].Blacklisted = true; o[1].HostID = 101 }, host: "103"},
		{name: "404 auth_error", fake: func(c *fakevast.Config) { c.Key = "another-key" }, err: "vast refused the API key (wrong or revoked)", halted: "auth_error"},
		{name: "400 billing", fake: func(c *fakevast.Config) { c.BillingRefusal = "Insufficient balance: add credit to your account" },
			err: "for the account's billing", halted: "billing"},
		{name: "410 deprecated search", fake: func(c *fakevast.Config) { c.Deprecated = map[string]bool{"POST /api/v0/bundles/": true} },
			err: "vast retired POST /api/v0/bundles/ (deprecated_endpoint)", halted: "deprecated_endpoint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			offers := []fakevast.Offer{off(1, 11, 101, 0.10), off(2, 12, 102, 0.11), off(3, 13, 103, 0.12)}
			if c.offers != nil {
				c.offers(offers)
			}
			e := newEnvWith(t, offers, nil, c.fake)
			p := e.provider(t, "c1", nil)
			ctx := context.Background()
			r, err := p.Rent(ctx, rentReq("a"))
			if c.host != "" {
				if err != nil || r.HostID != c.host {
					t.Fatalf("rent = %+v, %v; want host %s", r, err, c.host)
				}
				if n := offersOf(e); n[2] != 0 && c.host == "103" {
					t.Errorf("offer 2 of the host that blacklisted the account was tried")
				}
				if st := p.Status(); st.Halted != "" {
					t.Errorf("status = %+v, want renting", st)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("rent error = %v, want one saying %q", err, c.err)
			}
			st := p.Status()
			if st.Halted != c.halted || !strings.Contains(st.Detail, c.err) {
				t.Errorf("status = %+v, want halted %s with the error", st, c.halted)
			}
			before, _ := e.fake.Stats()
			if _, err := p.Rent(ctx, rentReq("b")); err == nil || !strings.Contains(err.Error(), "renting stopped ("+c.halted) {
				t.Errorf("second rent: %v, want renting stopped (%s …)", err, c.halted)
			}
			if after, _ := e.fake.Stats(); total(after) != total(before) {
				t.Errorf("a halted rent sent %d requests, want none", total(after)-total(before))
			}
			if c.halted == "billing" {
				e.clock.Add(billingPause + time.Second) // the owner may have added credit: one create tells
				p.Rent(ctx, rentReq("c"))
				if after, _ := e.fake.Stats(); after["PUT /api/v0/asks/{id}/"] != before["PUT /api/v0/asks/{id}/"]+1 {
					t.Errorf("after the billing pause: %d creates, want one more", after["PUT /api/v0/asks/{id}/"])
				}
			}
			if strings.Contains(e.logs.String(), testKey) {
				t.Error("API key in the logs")
			}
		})
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestRevokedKeyIsNotGone: a key revoked while rentals run makes vast
// answer 404 auth_error; that is not "the instance is gone" (which would
// end it), and renting stops.
func TestRevokedKeyIsNotGone(t *testing.T) {
	e := newEnv(t, fakevast.DefaultOffers(3), nil)
	p := e.provider(t, "c1", nil)
	ctx := context.Background()
	r, err := p.Rent(ctx, rentReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	e.fake.RevokeKey()
	e.clock.Add(time.Minute) // the batched listing is stale
	if _, err := p.Get(ctx, r.InstanceID); err == nil || errors.Is(err, provider.ErrGone) || !errors.Is(err, ErrAuth) {
		t.Errorf("Get with a revoked key: %v; want an auth error, not gone", err)
	}
	if st := p.Status(); st.Halted != "auth_error" {
		t.Errorf("status = %+v, want halted auth_error", st)
	}
}

// TestSearchQuota: vast's 429 search_quota_exceeded stops searching until
// the reset it names (X-RateLimit-Reset: midnight UTC), with no retry
// (one request, not nine) and no search at all meanwhile; Status says so
// until the reset, then searching resumes.
func TestSearchQuota(t *testing.T) {
	e := newEnvWith(t, fakevast.DefaultOffers(6), nil, func(c *fakevast.Config) { c.SearchQuota = 1 })
	p, err := New(Config{Client: e.client, Cluster: "c1", Log: slog.New(slog.NewTextHandler(e.logs, nil)), Now: e.clock.Now,
		Settings: Settings{Image: "img:1", NodeTypes: map[string]OfferSpec{"cpu": {MaxDPH: 0.5}, "cheap": {MaxDPH: 0.3}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	searches := func() int { c, _ := e.fake.Stats(); return c["POST /api/v0/bundles/"] }
	if _, err := p.Rent(ctx, rentReq("a")); err != nil {
		t.Fatal(err)
	}
	req := rentReq("b")
	req.NodeType = "cheap" // another search
	_, err = p.Rent(ctx, req)
	if !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "daily search quota is used up") {
		t.Fatalf("rent over the quota: %v", err)
	}
	now := e.clock.Now().UTC()
	reset := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	st := p.Status()
	if st.Halted != "search_quota_exceeded" || st.Until == nil || !st.Until.Equal(reset) {
		t.Errorf("status = %+v, want search_quota_exceeded until %s", st, reset)
	}
	if n := searches(); n != 2 {
		t.Errorf("%d searches, want 2 (the quota answer is not retried)", n)
	}
	req.CandidateID = "c"
	if _, err := p.Rent(ctx, req); !errors.Is(err, ErrQuota) || searches() != 2 {
		t.Errorf("rent during the quota: %v after %d searches; want the quota error and no search", err, searches())
	}
	if strings.Count(e.logs.String(), "daily search quota is used up; no offer search") != 1 {
		t.Errorf("want the quota logged once:\n%s", e.logs.String())
	}
	e.clock.Add(reset.Sub(now) + time.Second)
	req.CandidateID = "d"
	if _, err := p.Rent(ctx, req); err != nil || searches() != 3 {
		t.Errorf("after the reset: %v after %d searches; want a rental after one more search", err, searches())
	}
	if st := p.Status(); st.Halted != "" {
		t.Errorf("status after the reset = %+v, want renting", st)
	}
}

// TestRetryAfterFromFake: a 429 with Retry-After (fakevast's knob) waits
// that long and succeeds, with no doubling backoff; one asking more than
// a minute fails the call with no retry.
func TestRetryAfterFromFake(t *testing.T) {
	for _, c := range []struct {
		after time.Duration
		ok    bool
	}{{3 * time.Second, true}, {90 * time.Second, false}} {
		none := Limits{}
		e := newEnvWith(t, fakevast.DefaultOffers(6), &none, func(f *fakevast.Config) {
			f.Limits, f.MinInterval, f.RetryAfter = nil, 2*time.Second, c.after
		})
		p, err := New(Config{Client: e.client, Cluster: "c1", Log: slog.New(slog.NewTextHandler(e.logs, nil)), Now: e.clock.Now,
			Settings: Settings{Image: "img:1", NodeTypes: map[string]OfferSpec{"cpu": {MaxDPH: 0.5}, "cheap": {MaxDPH: 0.3}}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := p.Rent(ctx, rentReq("a")); err != nil {
			t.Fatal(err)
		}
		req := rentReq("b")
		req.NodeType = "cheap" // a second search at once: 429
		start := e.clock.Now()
		_, err = p.Rent(ctx, req)
		calls, limited := e.fake.Stats()
		switch {
		case c.ok && (err != nil || limited == 0 || !strings.Contains(e.logs.String(), "retry_after=3s") || e.clock.Now().Sub(start) < c.after):
			t.Errorf("Retry-After %s: %v, %d limited, waited %s; want a rental after waiting it:\n%s", c.after, err, limited, e.clock.Now().Sub(start), e.logs.String())
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "more than 1m0s: not retried") || calls["POST /api/v0/bundles/"] != 2):
			t.Errorf("Retry-After %s: %v after %d searches; want a failure naming it and no retry", c.after, err, calls["POST /api/v0/bundles/"])
		}
	}
}

// TestThresholdFrom429: vast's 429 text names the endpoint's threshold;
// a client that kept a shorter interval follows it from then on.
func TestThresholdFrom429(t *testing.T) {
	none := Limits{}
	e := newEnv(t, fakevast.DefaultOffers(6), &none)
	p := e.provider(t, "c1", nil)
	rentAll(t, p, 3)
	want := fakevast.VastLimits().Scale(testScale)["create"].Interval
	if got := e.client.pacer.interval(EpCreate); got < want {
		t.Errorf("create interval after 429s = %s, want at least vast's threshold %s", got, want)
	}
}

// TestOfferFilters: the filters reach vast's search as vast expects them
// ({"field": {"op": value}}, numbers as the CLI's strings, geolocation a
// list, passthrough fields as given), node type over provider block over
// defaults; an offer below any filter is not rented even when vast
// returns it; the defaults alone are the safe ones.
func TestOfferFilters(t *testing.T) {
	rel, dc, down, no := 0.99, true, 500.0, false
	offers := []fakevast.Offer{off(1, 11, 101, 0.10), off(2, 12, 102, 0.11), off(3, 13, 103, 0.12), off(4, 14, 104, 0.13), off(5, 15, 105, 0.14)}
	offers[0].Reliability2 = 0.95
	offers[1].Geolocation = "DE"
	offers[2].InetDown = 300
	for i := range offers {
		offers[i].Datacenter = i != 3
	}
	e := newEnv(t, offers, nil)
	st := Settings{Image: "rayproject/ray:2.53.0-py311-cu128"}
	st.Reliability2, st.Datacenter, st.Geolocation = &rel, &dc, []string{"US", "CA"}
	st.Search = map[string]map[string]any{"static_ip": {"eq": true}}
	spec := OfferSpec{MaxDPH: 0.5}
	spec.InetDown = &down
	st.NodeTypes = map[string]OfferSpec{"cpu": spec}
	p, err := New(Config{Client: e.client, Cluster: "c1", Settings: st, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	q := p.query(p.spec("cpu"), rentReq("a"))
	body := q.Body()
	for k, want := range map[string]string{
		"reliability2": `{"gte":"0.99"}`, "verified": `{"eq":true}`, "cuda_max_good": `{"gte":"12.8"}`, "inet_down": `{"gte":"500"}`,
		"inet_up": `{"gte":"100"}`, "datacenter": `{"eq":true}`, "geolocation": `{"in":["US","CA"]}`, "static_ip": `{"eq":true}`,
	} {
		if got := jsonOf(body[k]); got != want {
			t.Errorf("search %s = %s, want %s", k, got, want)
		}
	}
	r, err := p.Rent(context.Background(), rentReq("a"))
	if err != nil || r.HostID != "105" {
		t.Errorf("rent = %+v, %v; want host 105, the one offer every filter admits", r, err)
	}
	// vast ignoring a filter must not rent below it: the answer is checked.
	kept := q.Filters.admits(Offer{Verified: true, Reliability2: 0.95, CUDAMaxGood: 12.8, InetDown: 900, InetUp: 900})
	if kept {
		t.Error("an offer below reliability2 passes the answer check")
	}

	def, _ := New(Config{Client: e.client, Cluster: "c2", Now: e.clock.Now, Settings: Settings{Image: "img:1"}})
	body = def.query(def.spec("cpu"), rentReq("a")).Body()
	for k, want := range map[string]string{
		"reliability2": `{"gte":"0.98"}`, "verified": `{"eq":true}`, "cuda_max_good": `{"gte":"12.1"}`, "inet_down": `{"gte":"100"}`, "inet_up": `{"gte":"100"}`,
		"datacenter": `null`, "geolocation": `null`,
	} {
		if got := jsonOf(body[k]); got != want {
			t.Errorf("defaults: search %s = %s, want %s", k, got, want)
		}
	}
	any, _ := New(Config{Client: e.client, Cluster: "c3", Now: e.clock.Now, Settings: Settings{Image: "img:1", OfferFilters: wire.OfferFilters{Verified: &no}}})
	if got := jsonOf(any.query(any.spec("cpu"), rentReq("a")).Body()["verified"]); got != "null" {
		t.Errorf("verified false: search verified = %s, want it left out (verified or not)", got)
	}
}

// TestTwoHeadsOneAccount: a second head on the account (another cluster)
// does not rent a machine the first holds, even by another of its offers;
// and when vast sells one offer to both (two creates racing), both heads
// agree that the lower instance keeps the machine and the other yields.
func TestTwoHeadsOneAccount(t *testing.T) {
	offers := []fakevast.Offer{off(1, 77, 7, 0.10), off(2, 77, 7, 0.11), off(3, 88, 8, 0.50)}
	e := newEnvWith(t, offers, nil, func(c *fakevast.Config) { c.Oversell = true })
	a := e.provider(t, "a", nil)
	lim := DefaultLimits().Scale(testScale)
	cb, err := NewClient(ClientConfig{BaseURL: e.url, Key: secret.New(testKey), Limits: &lim, Now: e.clock.Now,
		Sleep: func(ctx context.Context, d time.Duration) error { e.clock.Add(d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Client: cb, Cluster: "b", Now: e.clock.Now,
		Settings: Settings{Image: "img:1", NodeTypes: map[string]OfferSpec{"cpu": {GPUName: "fake-cpu", MaxDPH: 0.5}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ra, err := a.Rent(ctx, rentReq("x"))
	if err != nil || ra.HostID != "7" {
		t.Fatalf("head a = %+v, %v", ra, err)
	}
	rb, err := b.Rent(ctx, rentReq("y"))
	if err != nil || rb.HostID != "8" {
		t.Errorf("head b = %+v, %v; want machine 88: 77 holds head a's rental", rb, err)
	}
	// Head b's create raced head a's on offer 1, and vast sold it twice.
	race, err := cb.CreateInstance(ctx, 1, CreateRequest{ClientID: "me", Image: "img:1", Disk: 16, Label: LabelPrefix("b") + "z", Runtype: "args"})
	if err != nil {
		t.Fatal(err)
	}
	yields := func(p *Provider) map[string]bool {
		rs, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, r := range rs {
			m[r.CandidateID] = r.Yield
		}
		return m
	}
	if ya, yb := yields(a), yields(b); ya["x"] || yb["y"] || !yb["z"] {
		t.Errorf("yield: head a %v, head b %v; want only b's racing rental z (instance %d) to yield machine 77", ya, yb, race)
	}
}

// TestVanishedStatus: List reports an instance vast shows exited,
// offline, unknown or stopped as vanished (running ones not).
func TestVanishedStatus(t *testing.T) {
	e := newEnv(t, fakevast.DefaultOffers(6), nil)
	p := e.provider(t, "c1", nil)
	ctx := context.Background()
	ids := map[string]string{}
	for _, st := range []string{"exited", "offline", "unknown", "stopped", ""} {
		r, err := p.Rent(ctx, rentReq("v"+st))
		if err != nil {
			t.Fatal(err)
		}
		ids[r.InstanceID] = st
	}
	e.fake.Wait() // the backend started them all
	e.clock.Add(11 * time.Second)
	for id, st := range ids {
		if st != "" {
			n, _ := parseID(id)
			e.fake.Vanish(ctx, n, st)
		}
	}
	rs, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if want := ids[r.InstanceID]; r.Vanished != want || (want == "") != r.Running {
			t.Errorf("rental %s: vanished %q running %v, want %q", r.InstanceID, r.Vanished, r.Running, want)
		}
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestImageCUDA: the CUDA floor comes from Ray's "-cuXYZ" image tag, else
// the default.
func TestImageCUDA(t *testing.T) {
	for image, want := range map[string]float64{
		"rayproject/ray:2.53.0-py311-cu128": 12.8, "rayproject/ray:2.9.0-cu118": 11.8, "rayproject/ray:2.40.0-py310-cu121-aarch64": 12.1,
		"rayproject/ray:latest-gpu": DefaultCUDA, "img:1": DefaultCUDA, "reg.example/cu128:x": DefaultCUDA,
	} {
		if got := ImageCUDA(image); got != want {
			t.Errorf("ImageCUDA(%q) = %g, want %g", image, got, want)
		}
	}
}
