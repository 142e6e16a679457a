package vast

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// TestWireBidMatchesCLI captures an interruptible rental's requests on the
// wire against fakevast and compares them with the CLI's fixtures: the
// search asks type "bid" with min_bid as its price filter (search__offers
// -t bid), the create carries the bid as "price" (create__instance
// --bid_price), and a pending price increase is read and rejected with
// exactly the body vast accepts.
func TestWireBidMatchesCLI(t *testing.T) {
	fx := cliFixtures(t)
	clk := rvtest.NewClock(time.Unix(1_800_000_000, 0))
	fake := fakevast.New(fakevast.Config{Key: testKey, Offers: fakevast.DefaultOffers(4), NoLimits: true, Now: clk.Now})
	rec := &recorder{next: fake.Handler()}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	lim := Limits{}
	c, err := NewClient(ClientConfig{BaseURL: srv.URL, Key: secret.New(testKey), Limits: &lim, Now: clk.Now,
		Sleep: func(ctx context.Context, d time.Duration) error { clk.Add(d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Client: c, Cluster: "w", Now: clk.Now, Settings: Settings{Image: "img:1",
		NodeTypes: map[string]OfferSpec{"cpu": {Interruptible: &wire.BidPolicy{MaxBidDPH: 0.3, Margin: 0.25}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := p.Rent(ctx, rentReq("c-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.RaisePrice(instanceID(t, r), fakevast.Rise{GPUDPH: 0.2}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.List(ctx); err != nil {
		t.Fatal(err)
	}
	by := map[string][]captured{}
	for _, x := range rec.reqs {
		by[x.method+" "+strings.TrimRight(x.path, "0123456789/")] = append(by[x.method+" "+strings.TrimRight(x.path, "0123456789/")], x)
	}
	search, create := by["POST /api/v0/bundles"], by["PUT /api/v0/asks"]
	if len(search) == 0 || len(create) != 1 {
		t.Fatalf("captured %d searches and %d creates", len(search), len(create))
	}
	sameShape(t, "bid search", search[0].body, merged(t, fx["search offers --type bid"].Body, fx["search offers with filters"].Body), "type", "min_bid", "order")
	var q map[string]any
	json.Unmarshal(search[0].body, &q)
	if q["type"] != "bid" || q["dph_total"] != nil || fmt.Sprint(q["order"]) != "[[min_bid asc]]" {
		t.Errorf("bid search: type %v, dph_total %v, order %v; want bid, no dph_total cap (min_bid caps the bid), min_bid first", q["type"], q["dph_total"], q["order"])
	}
	sameShape(t, "bid create", create[0].body, fx["create instance --bid_price"].Body, "price")
	var body map[string]any
	json.Unmarshal(create[0].body, &body)
	if p, _ := body["price"].(float64); !near(p, 0.05) {
		t.Errorf("bid create: price %v, want 0.05 (min_bid 0.04 + 25%%)", body["price"])
	}
	list, reject := fx["show pending price increases"], fx["reject price increase, none pending"]
	if len(by[list.Method+" "+strings.TrimRight(list.Path, "/")]) != 1 {
		t.Errorf("pending price increases read %d times, want once", len(by[list.Method+" "+strings.TrimRight(list.Path, "/")]))
	}
	rj := by[reject.Method+" "+strings.TrimRight(reject.Path, "/")]
	if len(rj) != 1 {
		t.Fatalf("%d rejects sent, want 1", len(rj))
	}
	var got, want map[string]any
	json.Unmarshal(rj[0].body, &got)
	json.Unmarshal(reject.Body, &want)
	if len(got) != len(want) || got["pending_price_increase_id"] == nil {
		t.Errorf("reject body %s, want exactly the keys of %s", rj[0].body, reject.Body)
	}
}
