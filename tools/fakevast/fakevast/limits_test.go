package fakevast

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestPriceIncreaseLimits: each price-increase endpoint takes one request
// per 2 s (vast's generated specs, x-rateLimit 2.0): a second reject
// within 2 s is 429, one 2 s later is served, and the list and accept
// endpoints keep their own counts.
func TestPriceIncreaseLimits(t *testing.T) {
	clk := rvtest.NewClock(time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC))
	s := New(Config{Key: "k", Now: clk.Now})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	a := api{t, srv.URL, "k"}
	body := `{"pending_price_increase_id": 1}`
	if st, _ := a.call("PUT", "/api/v0/instances/reject-price-increase/", body); st != 404 {
		t.Fatalf("first reject: %d, want 404 (none pending)", st)
	}
	if st, _ := a.call("PUT", "/api/v0/instances/reject-price-increase/", body); st != 429 {
		t.Errorf("second reject at once: %d, want 429", st)
	}
	if st, _ := a.call("PUT", "/api/v0/instances/accept-price-increase/", body); st != 404 {
		t.Errorf("accept beside it: %d, want 404 (its own limit)", st)
	}
	if st, _ := a.call("GET", "/api/v0/instances/pending-price-increases/", ""); st != 200 {
		t.Errorf("list beside them: %d, want 200 (its own limit)", st)
	}
	clk.Add(2 * time.Second)
	if st, _ := a.call("PUT", "/api/v0/instances/reject-price-increase/", body); st != 404 {
		t.Errorf("reject 2 s later: %d, want 404", st)
	}
}
