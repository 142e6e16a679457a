package fakevast

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// rawCall is api.call keeping the headers and the plain body.
func rawCall(t *testing.T, url, key, method, path, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header, b.String()
}

// TestVastAnswers: the fake gives each of vast's answers README names: the
// account (users/current), a create started stopped, a host that
// blacklisted the account, an offer no longer available, a billing
// refusal, a retired endpoint, a revoked key, an offer sold twice, a
// host that lost its instance, the daily search quota and Retry-After
// with the threshold in the 429 text.
func TestVastAnswers(t *testing.T) {
	clk := rvtest.NewClock(time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC))
	offers := DefaultOffers(5)
	offers[0].StartsStopped, offers[1].Blacklisted, offers[2].Unavailable = true, true, true
	s := New(Config{Key: "k", Offers: offers, NoLimits: true, Now: clk.Now, Oversell: true,
		Deprecated: map[string]bool{"GET /api/v0/instances/": true}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	a := api{t, srv.URL, "k"}

	if st, m := a.call("GET", "/api/v0/users/current", ""); st != 200 || m["host_agreement_accepted"] != false || m["api_key"] != "k" {
		t.Errorf("users/current: %d %v", st, m)
	}
	st, m := a.call("PUT", "/api/v0/asks/5001/", `{"image":"img"}`)
	id, _ := m["new_contract"].(float64)
	if st != 200 || m["success"] != false || id == 0 {
		t.Errorf("create on a machine that starts stopped: %d %v, want 200 success false with new_contract", st, m)
	}
	if _, m := a.call("GET", "/api/v0/instances/"+strconv.FormatInt(int64(id), 10)+"/", ""); m["instances"].(map[string]any)["actual_status"] != "stopped" {
		t.Errorf("the stopped create's instance: %v", m)
	}
	if st, m := a.call("PUT", "/api/v0/asks/5002/", `{"image":"img"}`); st != 400 || m["error"] != "invalid_args" || !strings.Contains(m["msg"].(string), "blacklisted") {
		t.Errorf("blacklisted: %d %v", st, m)
	}
	if st, m := a.call("PUT", "/api/v0/asks/5003/", `{"image":"img"}`); st != 410 || m["error"] != "no_such_ask" || !strings.Contains(m["msg"].(string), "no longer available") {
		t.Errorf("no longer available: %d %v", st, m)
	}
	if st, m := a.call("GET", "/api/v0/instances/", ""); st != 410 || m["error"] != "deprecated_endpoint" {
		t.Errorf("deprecated: %d %v", st, m)
	}
	st, m = a.call("PUT", "/api/v0/asks/5004/", `{"image":"img"}`)
	first, _ := m["new_contract"].(float64)
	if st2, m2 := a.call("PUT", "/api/v0/asks/5004/", `{"image":"img"}`); st != 200 || st2 != 200 || m2["new_contract"] == m["new_contract"] {
		t.Errorf("oversold offer: %d %v then %d %v, want two instances", st, m, st2, m2)
	}
	if err := s.Vanish(context.Background(), int64(first), "offline"); err != nil {
		t.Fatal(err)
	}
	if _, m := a.call("GET", "/api/v0/instances/"+strconv.FormatInt(int64(first), 10)+"/", ""); m["instances"].(map[string]any)["actual_status"] != "offline" {
		t.Errorf("vanished instance: %v", m)
	}
	s.RevokeKey()
	if st, m := a.call("GET", "/api/v1/instances/", ""); st != 404 || m["error"] != "auth_error" {
		t.Errorf("revoked key: %d %v, want 404 auth_error", st, m)
	}

	q := New(Config{Key: "k", NoLimits: true, Now: clk.Now, SearchQuota: 2, BillingRefusal: "Insufficient balance: add credit"})
	qs := httptest.NewServer(q.Handler())
	defer qs.Close()
	midnight := strconv.FormatInt(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).Unix(), 10)
	for i := 1; i <= 3; i++ {
		st, h, body := rawCall(t, qs.URL, "k", "POST", "/api/v0/bundles/", `{}`)
		switch {
		case i <= 2 && st != 200:
			t.Errorf("search %d within the quota: %d %s", i, st, body)
		case i == 3 && (st != 429 || !strings.Contains(body, "search_quota_exceeded") || h.Get("X-RateLimit-Reset") != midnight):
			t.Errorf("search over the quota: %d %s reset %q, want 429 search_quota_exceeded, reset at midnight UTC (%s)", st, body, h.Get("X-RateLimit-Reset"), midnight)
		}
	}
	clk.Add(9 * time.Hour) // the next UTC day
	if st, _, body := rawCall(t, qs.URL, "k", "POST", "/api/v0/bundles/", `{}`); st != 200 {
		t.Errorf("search the next day: %d %s", st, body)
	}
	if st, m := (api{t, qs.URL, "k"}).call("PUT", "/api/v0/asks/5001/", `{"image":"img"}`); st != 400 || m["error"] != "invalid_args" || !strings.Contains(m["msg"].(string), "balance") {
		t.Errorf("billing: %d %v", st, m)
	}

	r := New(Config{Key: "k", MinInterval: 1500 * time.Millisecond, RetryAfter: 3 * time.Second, Now: clk.Now})
	rs := httptest.NewServer(r.Handler())
	defer rs.Close()
	rawCall(t, rs.URL, "k", "GET", "/api/v1/instances/", "")
	st, h, body := rawCall(t, rs.URL, "k", "GET", "/api/v1/instances/", "")
	if st != 429 || h.Get("Retry-After") != "3" || body != "API requests too frequent: endpoint threshold=1.5" {
		t.Errorf("429: %d Retry-After %q %q", st, h.Get("Retry-After"), body)
	}
}
