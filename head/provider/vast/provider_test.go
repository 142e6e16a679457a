package vast

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

type launches struct {
	mu sync.Mutex
	m  map[int64]fakevast.Launch
}

func (l *launches) Start(_ context.Context, x fakevast.Launch) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[x.ID] = x
	return "203.0.113.9", nil
}
func (l *launches) Stop(context.Context, int64) error { return nil }
func (l *launches) Kill(context.Context, int64) error { return nil }

type blocked []wire.BlockEntry

func (b blocked) Entries() []wire.BlockEntry { return b }

type env struct {
	fake   *fakevast.Server
	clock  *rvtest.Clock
	be     *launches
	logs   *rvtest.Buffer
	client *Client
	url    string
}

// testScale runs vast's rate limits 10 000 times faster on the fake clock
// (create 0.45 ms apart): the ratios stay, the test's clock barely moves.
const testScale = 1e-4

// newEnv starts fakevast enforcing vast's limits (scaled) and a client
// whose pacer keeps the same limits; clientLimits, when given, replaces the
// client's (a client that does not know vast's limits).
func newEnv(t *testing.T, offers []fakevast.Offer, clientLimits *Limits) *env {
	return newEnvWith(t, offers, clientLimits, nil)
}

// newEnvWith is newEnv with fakevast's config changed by set first.
func newEnvWith(t *testing.T, offers []fakevast.Offer, clientLimits *Limits, set func(*fakevast.Config)) *env {
	t.Helper()
	clk := rvtest.NewClock(time.Unix(1_800_000_000, 0))
	be := &launches{m: map[int64]fakevast.Launch{}}
	fc := fakevast.Config{Key: testKey, Offers: offers, StartDelay: 10 * time.Second, Limits: fakevast.VastLimits().Scale(testScale),
		Backend: be, Now: clk.Now}
	if set != nil {
		set(&fc)
	}
	fake := fakevast.New(fc)
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	logs := &rvtest.Buffer{}
	lim := DefaultLimits().Scale(testScale)
	if clientLimits != nil {
		lim = *clientLimits
	}
	c, err := NewClient(ClientConfig{BaseURL: srv.URL, Key: secret.New(testKey), Log: slog.New(slog.NewTextHandler(logs, nil)),
		Limits: &lim, Now: clk.Now,
		Sleep: func(ctx context.Context, d time.Duration) error { clk.Add(d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return &env{fake: fake, clock: clk, be: be, logs: logs, client: c, url: srv.URL}
}

func (e *env) provider(t *testing.T, cluster string, b Blocklist) *Provider {
	p, err := New(Config{Client: e.client, Cluster: cluster, Blocklist: b, Log: slog.New(slog.NewTextHandler(e.logs, nil)), Now: e.clock.Now,
		Settings: Settings{Image: "img:1", NodeTypes: map[string]OfferSpec{"cpu": {GPUName: "fake-cpu", MaxDPH: 0.5}}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func rentReq(cand string) provider.RentRequest {
	return provider.RentRequest{CandidateID: cand, NodeType: "cpu", GPUs: 0, Command: "exec /bin/bootloader",
		Env: map[string]string{wire.EnvHead: "192.0.2.1", wire.EnvJoinToken: "tok-" + cand}}
}

// TestRentFollowDestroy: Rent picks the cheapest offer, the rental carries
// the env (RAYVAST_* + the 64 "-p 7000N:7000N" requests), the command, the
// cluster label and never the API key; Get reports not running until vast
// says running with a public IP; List finds it by label (and not another
// cluster's); Destroy ends it and Get says gone.
func TestRentFollowDestroy(t *testing.T) {
	e := newEnv(t, fakevast.DefaultOffers(3), nil)
	p := e.provider(t, "c1", nil)
	other := e.provider(t, "c2", nil)
	ctx := context.Background()
	r, err := p.Rent(ctx, rentReq("cand1"))
	if err != nil {
		t.Fatal(err)
	}
	if r.HostID != "1001" || r.InstanceID == "" || r.Running {
		t.Errorf("rental = %+v, want host 1001 (cheapest), not running", r)
	}
	if _, err := other.Rent(ctx, rentReq("x")); err != nil {
		t.Fatal(err)
	}
	e.fake.Wait()
	got, err := p.Get(ctx, r.InstanceID)
	if err != nil || got.Running || got.PublicIP != "" {
		t.Errorf("Get before the delay = %+v, %v", got, err)
	}
	e.clock.Add(11 * time.Second)
	got, err = p.Get(ctx, r.InstanceID)
	if err != nil || !got.Running || got.PublicIP != "203.0.113.9" || got.CandidateID != "cand1" || got.HostID != "1001" {
		t.Errorf("Get after the delay = %+v, %v", got, err)
	}
	live := e.fake.Live()
	in := live[0]
	if in.Label != "rayvast:c1:cand1" || in.Image != "img:1" || in.Runtype != "args" {
		t.Errorf("instance = %+v", in)
	}
	if len(in.Env) != 2+64 || in.Env["-p 70000:70000"] != "1" || in.Env["-p 70063:70063"] != "1" || in.Env[wire.EnvJoinToken] != "tok-cand1" {
		t.Errorf("rental env has %d keys: %v", len(in.Env), in.Env)
	}
	if strings.Join(e.be.m[in.ID].Args, " ") != "-c exec /bin/bootloader" {
		t.Errorf("command = %q", e.be.m[in.ID].Args)
	}
	for k, v := range in.Env {
		if strings.Contains(k+v, testKey) {
			t.Errorf("API key in the rental env %s", k)
		}
	}
	list, err := p.List(ctx)
	if err != nil || len(list) != 1 || list[0].CandidateID != "cand1" {
		t.Errorf("List = %+v, %v; want only cand1", list, err)
	}
	if err := p.Destroy(ctx, r.InstanceID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, r.InstanceID); !errors.Is(err, provider.ErrGone) {
		t.Errorf("Get after Destroy: %v, want ErrGone", err)
	}
	if err := p.Destroy(ctx, r.InstanceID); err != nil {
		t.Errorf("Destroy twice: %v", err)
	}
	if strings.Contains(e.logs.String(), testKey) {
		t.Error("API key in the logs")
	}
}

// TestBlocklistedHostAndMachineSkipped: a blocklisted host is not rented
// again, nor is a machine seen on it; with every host blocked Rent fails
// clearly.
func TestBlocklistedHostAndMachineSkipped(t *testing.T) {
	offers := fakevast.DefaultOffers(3)
	// A second offer of host 1001's machine under a new host id (a host
	// that re-registered): excluded by machine.
	offers = append(offers, fakevast.Offer{ID: 5999, MachineID: 2001, HostID: 4242, GPUName: "fake-cpu", DPHTotal: 0.01, Rentable: true, Verified: true, DirectPortCount: 100})
	e := newEnv(t, offers, nil)
	var bl blocked
	p := e.provider(t, "c1", &bl)
	ctx := context.Background()
	first, err := p.Rent(ctx, rentReq("a")) // cheapest: 5999 on host 4242
	if err != nil || first.HostID != "4242" {
		t.Fatalf("first = %+v, %v", first, err)
	}
	p.Destroy(ctx, first.InstanceID)
	p.seen(1001, 2001) // as seen when 1001 was rented before
	bl = blocked{{HostID: "1001", Class: wire.BlockSecurity}}
	r, err := p.Rent(ctx, rentReq("b"))
	if err != nil || r.HostID != "1002" {
		t.Errorf("rent with 1001 blocked = %+v, %v; want host 1002 (4242 shares machine 2001)", r, err)
	}
	bl = blocked{{HostID: "1001"}, {HostID: "1002"}, {HostID: "1003"}, {HostID: "4242"}}
	if _, err := p.Rent(ctx, rentReq("c")); err == nil || !strings.Contains(err.Error(), "no offer") {
		t.Errorf("rent with all blocked: %v", err)
	}
}

// TestRentBurstPaced: eight concurrent Rents against a fake enforcing
// vast's limits all succeed with no 429 at all: they share one search and
// their creates leave the pacer 4.5 (scaled) apart.
func TestRentBurstPaced(t *testing.T) {
	e := newEnv(t, fakevast.DefaultOffers(10), nil)
	p := e.provider(t, "c1", nil)
	rentAll(t, p, 8)
	calls, limited := e.fake.Stats()
	if limited != 0 {
		t.Errorf("%d answers were 429 (calls %v), want none", limited, calls)
	}
	if n := calls["POST /api/v0/bundles/"]; n != 1 {
		t.Errorf("%d searches for 8 rents, want 1", n)
	}
}

// TestRentUnder429: a client whose pacer does not know vast's limits gets
// 429s and still rents everything through the backoff.
func TestRentUnder429(t *testing.T) {
	none := Limits{}
	e := newEnv(t, fakevast.DefaultOffers(6), &none)
	p := e.provider(t, "c1", nil)
	rentAll(t, p, 4)
	if _, limited := e.fake.Stats(); limited == 0 {
		t.Error("no 429 happened: the test does not exercise the backoff")
	}
}

func rentAll(t *testing.T, p *Provider, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.Rent(context.Background(), rentReq("r"+string(rune('a'+i))))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	machines := map[int64]bool{}
	for _, in := range p.live {
		if machines[in] {
			t.Errorf("two rentals on machine %d", in)
		}
		machines[in] = true
	}
}

// TestOneRentalPerMachine: a machine that holds a live rental of this
// cluster is skipped (one node per public IP), also by a restarted head
// that knows it only from the listing; once destroyed, it is rentable
// again.
func TestOneRentalPerMachine(t *testing.T) {
	offers := []fakevast.Offer{
		{ID: 1, MachineID: 77, HostID: 7, GPUName: "fake-cpu", DPHTotal: 0.10, Rentable: true, Verified: true, DirectPortCount: 100},
		{ID: 2, MachineID: 77, HostID: 7, GPUName: "fake-cpu", DPHTotal: 0.11, Rentable: true, Verified: true, DirectPortCount: 100},
		{ID: 3, MachineID: 88, HostID: 8, GPUName: "fake-cpu", DPHTotal: 0.50, Rentable: true, Verified: true, DirectPortCount: 100},
	}
	e := newEnv(t, offers, nil)
	p := e.provider(t, "c1", nil)
	ctx := context.Background()
	a, err := p.Rent(ctx, rentReq("a"))
	if err != nil || a.HostID != "7" {
		t.Fatalf("first = %+v, %v", a, err)
	}
	restarted := e.provider(t, "c1", nil)
	if _, err := restarted.List(ctx); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]*Provider{"same head": p, "restarted head": restarted} {
		b, err := q.Rent(ctx, rentReq("b-"+strings.ReplaceAll(name, " ", "-")))
		if err != nil || b.HostID != "8" {
			t.Errorf("%s: second rent = %+v, %v; want machine 88 (77 holds a)", name, b, err)
		}
		if err == nil {
			q.Destroy(ctx, b.InstanceID)
		}
	}
	if err := p.Destroy(ctx, a.InstanceID); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Minute) // the offers of the last search are stale
	c, err := p.Rent(ctx, rentReq("c"))
	if err != nil || c.HostID != "7" {
		t.Errorf("after destroy: %+v, %v; want machine 77 again", c, err)
	}
}

// TestBudgetCapsOffer: a rental's MaxDPH (what the cluster budget leaves)
// caps the search below the node type's max_dph.
func TestBudgetCapsOffer(t *testing.T) {
	e := newEnv(t, fakevast.DefaultOffers(5), nil)
	p := e.provider(t, "c1", nil)
	req := rentReq("a")
	req.MaxDPH = 0.095
	if r, err := p.Rent(context.Background(), req); err == nil {
		t.Errorf("rented %+v at ≤ $0.095/h; every offer costs ≥ $0.10", r)
	}
	req.MaxDPH = 0.115
	r, err := p.Rent(context.Background(), req)
	if err != nil || r.DPHTotal > 0.115 || r.DPHTotal == 0 {
		t.Errorf("rent = %+v, %v; want an offer ≤ $0.115/h with its price", r, err)
	}
}

// TestDestroyShared: the driver and the leak sweep destroying one instance
// at once send one DELETE; a destroyed instance is not destroyed again; a
// refused destroy is retried and the instance ends.
func TestDestroyShared(t *testing.T) {
	e := newEnv(t, fakevast.DefaultOffers(3), nil)
	p := e.provider(t, "c1", nil)
	ctx := context.Background()
	r, err := p.Rent(ctx, rentReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); p.Destroy(ctx, r.InstanceID) }()
	}
	wg.Wait()
	if err := p.Destroy(ctx, r.InstanceID); err != nil {
		t.Fatal(err)
	}
	if calls, _ := e.fake.Stats(); calls["DELETE /api/v0/instances/{id}/"] != 1 || len(e.fake.Live()) != 0 {
		t.Errorf("%d DELETEs for 5 destroys of one instance, %d live; want 1 and 0", calls["DELETE /api/v0/instances/{id}/"], len(e.fake.Live()))
	}
}
