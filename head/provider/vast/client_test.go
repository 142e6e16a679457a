package vast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
)

// iv is a 1 s interval as the pacer keeps it (2% of slack).
const iv = time.Second + 20*time.Millisecond

const testKey = "vast-test-key-3f1c9a0b7d"

// script answers each request with the next status (then 200 with body).
type script struct {
	mu       sync.Mutex
	statuses []int
	body     string
	after    string // Retry-After on every non-200 answer
	errBody  string // the JSON body of a non-200, non-429 answer (default invalid_args)
	calls    int
	auth     []string
	paths    []string
	bodies   []string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.paths = append(s.paths, r.Method+" "+r.URL.RequestURI())
	b, _ := io.ReadAll(r.Body)
	s.bodies = append(s.bodies, string(b))
	if len(s.statuses) > 0 {
		st := s.statuses[0]
		s.statuses = s.statuses[1:]
		if st != 200 {
			if s.after != "" {
				w.Header().Set("Retry-After", s.after)
			}
			w.WriteHeader(st)
			switch {
			case st == 429 && s.errBody == "":
				io.WriteString(w, "API requests too frequent")
			case s.errBody != "":
				io.WriteString(w, s.errBody)
			default:
				io.WriteString(w, `{"success":false,"error":"invalid_args","msg":"bad thing"}`)
			}
			return
		}
	}
	io.WriteString(w, s.body)
}

func newTestClient(t *testing.T, h http.Handler, logBuf *bytes.Buffer) (*Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var waits []time.Duration
	var log *slog.Logger
	if logBuf != nil {
		log = slog.New(slog.NewTextHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	clk := rvtest.NewClock(time.Unix(1_800_000_000, 0))
	lim := Limits{Interval: map[string]time.Duration{EpList: time.Second, EpCreate: time.Second, EpSearch: time.Second}}
	c, err := NewClient(ClientConfig{BaseURL: srv.URL, Key: secret.New(testKey), Log: log, Limits: &lim, Now: clk.Now,
		Sleep: func(ctx context.Context, d time.Duration) error { waits = append(waits, d); clk.Add(d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return c, &waits
}

// TestRetries: a 429 waits for the pacer's backoff, doubling up to a
// minute; 5xx is retried for reads, no sooner than the endpoint's
// interval; a 4xx is surfaced at once with vast's message; a create is not
// repeated after a 500 (it may have rented).
func TestRetries(t *testing.T) {
	tests := []struct {
		name      string
		statuses  []int
		create    bool
		wantCalls int
		wantErr   string // substring; "" = success
		wantWaits []time.Duration
	}{
		{"429 then ok", []int{429, 429, 429, 200}, false, 4, "", []time.Duration{iv, 2 * iv, 4 * iv}},
		{"429 capped", []int{429, 429, 429, 429, 429, 429, 429, 429, 200}, false, 9, "", []time.Duration{iv, 2 * iv, 4 * iv, 8 * iv, 16 * iv, 32 * iv, time.Minute, time.Minute}},
		{"429 forever", []int{429, 429, 429, 429, 429, 429, 429, 429, 429, 429}, false, 9, "HTTP 429: API requests too frequent", nil},
		{"5xx retried", []int{500, 502, 200}, false, 3, "", []time.Duration{iv, iv}},
		{"4xx surfaced", []int{400}, false, 1, "HTTP 400: invalid_args: bad thing", nil},
		{"404 surfaced", []int{404}, false, 1, "HTTP 404", nil},
		{"create 429 retried", []int{429, 200}, true, 2, "", []time.Duration{iv}},
		{"create 503 retried", []int{503, 200}, true, 2, "", []time.Duration{iv}},
		// A gateway that timed out or lost the answer may have let the create through.
		{"create 502 not retried", []int{502, 200}, true, 1, "HTTP 502", nil},
		{"create 504 not retried", []int{504, 200}, true, 1, "HTTP 504", nil},
		{"create 500 not retried", []int{500}, true, 1, "HTTP 500", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"instances":[]}`
			if tt.create {
				body = `{"success":true,"new_contract":77}`
			}
			s := &script{statuses: tt.statuses, body: body}
			c, waits := newTestClient(t, s, nil)
			var err error
			if tt.create {
				_, err = c.CreateInstance(context.Background(), 5, CreateRequest{Image: "x", Disk: 16})
			} else {
				_, err = c.ListInstances(context.Background())
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if s.calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", s.calls, tt.wantCalls)
			}
			if tt.wantWaits != nil {
				want := tt.wantWaits
				if len(*waits) != len(want) {
					t.Fatalf("waits = %v, want %v", *waits, want)
				}
				for i := range want {
					if (*waits)[i] != want[i] {
						t.Errorf("wait %d = %v, want %v", i, (*waits)[i], want[i])
					}
				}
			}
		})
	}
}

// TestAuthHeaderAndNoKeyInLogs: the key goes only in the Authorization
// header, never in a URL, a log line or an error.
func TestAuthHeaderAndNoKeyInLogs(t *testing.T) {
	var logs bytes.Buffer
	s := &script{statuses: []int{429, 500, 400}, body: `{}`}
	c, _ := newTestClient(t, s, &logs)
	_, err := c.SearchOffers(context.Background(), Query{GPUName: "RTX 4090", NumGPUs: 1})
	if err == nil {
		t.Fatal("want an error after 400")
	}
	for _, a := range s.auth {
		if a != "Bearer "+testKey {
			t.Errorf("Authorization = %q", a)
		}
	}
	for _, p := range s.paths {
		if strings.Contains(p, testKey) {
			t.Errorf("key in URL %s", p)
		}
	}
	if strings.Contains(logs.String(), testKey) || strings.Contains(err.Error(), testKey) {
		t.Errorf("key leaked: logs %q err %v", logs.String(), err)
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("retries not logged: %q", logs.String())
	}
	if got := (ClientConfig{Key: secret.New(testKey)}); strings.Contains(slogText(got), testKey) {
		t.Error("ClientConfig prints the key")
	}
}

func slogText(v any) string {
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "cfg", v)
	return b.String()
}

// TestSearchQueryAndFilter: the search is POST /api/v0/bundles/ with the
// CLI's body: its default filters, string values, the GPU name with
// spaces, ports, storage, the excluded hosts and machines and the quality
// filters; offers that break them are dropped even when vast returns them.
func TestSearchQueryAndFilter(t *testing.T) {
	s := &script{body: `{"offers":[
		{"id":1,"machine_id":10,"host_id":100,"gpu_name":"RTX 4090","num_gpus":1,"dph_total":0.30,"direct_port_count":64,"verified":true,"reliability2":0.99},
		{"id":9,"machine_id":17,"host_id":107,"gpu_name":"RTX 4090","num_gpus":1,"dph_total":0.11,"direct_port_count":64,"verified":true,"reliability2":0.5},
		{"id":8,"machine_id":16,"host_id":106,"gpu_name":"RTX 4090","num_gpus":1,"dph_total":0.12,"direct_port_count":64,"verified":false,"reliability2":0.99},
		{"id":2,"machine_id":11,"host_id":101,"gpu_name":"RTX 4090","num_gpus":1,"dph_total":0.90,"direct_port_count":64,"verified":true,"reliability2":0.99},
		{"id":3,"machine_id":12,"host_id":666,"gpu_name":"RTX 4090","num_gpus":1,"dph_total":0.20,"direct_port_count":64,"verified":true,"reliability2":0.99},
		{"id":4,"machine_id":13,"host_id":102,"gpu_name":"RTX 3090","num_gpus":1,"dph_total":0.10,"direct_port_count":64,"verified":true,"reliability2":0.99},
		{"id":5,"machine_id":14,"host_id":103,"gpu_name":"RTX 4090","num_gpus":2,"dph_total":0.10,"direct_port_count":64,"verified":true,"reliability2":0.99},
		{"id":6,"machine_id":77,"host_id":104,"gpu_name":"RTX 4090","num_gpus":1,"dph_total":0.25,"direct_port_count":64,"verified":true,"reliability2":0.99},
		{"id":7,"machine_id":15,"host_id":105,"gpu_name":"RTX 4090","num_gpus":1,"dph_total":0.15,"direct_port_count":40,"verified":true,"reliability2":0.99}]}`}
	c, _ := newTestClient(t, s, nil)
	got, err := c.SearchOffers(context.Background(), Query{GPUName: "RTX_4090", NumGPUs: 1, MaxDPH: 0.5, MinPorts: 64, DiskGB: 16,
		ExcludeHosts: []int64{666}, ExcludeMachine: []int64{77}, Filters: Filters{Verified: true, Reliability2: 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != 1 {
		t.Errorf("offers = %+v, want only id 1", got)
	}
	if s.paths[0] != "POST /api/v0/bundles/" {
		t.Fatalf("request %s, want POST /api/v0/bundles/", s.paths[0])
	}
	var q map[string]any
	if err := json.Unmarshal([]byte(s.bodies[0]), &q); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"gpu_name": `{"eq":"RTX 4090"}`, "num_gpus": `{"eq":"1"}`, "dph_total": `{"lte":"0.5"}`, "direct_port_count": `{"gte":"64"}`,
		"host_id": `{"notin":["666"]}`, "machine_id": `{"notin":["77"]}`, "rentable": `{"eq":true}`, "verified": `{"eq":true}`,
		"external": `{"eq":false}`, "allocated_storage": `16`, "type": `"on-demand"`,
	} {
		b, _ := json.Marshal(q[field])
		if string(b) != want {
			t.Errorf("query %s = %s, want %s", field, b, want)
		}
	}
}

// TestShowGone: {"instances": null} and a 404 that says not found mean
// gone; a 404 that says something else (a bad key, a wrong path) does not;
// destroy of a gone instance is not an error.
func TestShowGone(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    http.HandlerFunc
		gone bool
	}{
		{"null", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"instances":null}`) }, true},
		{"404 not_found", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			io.WriteString(w, `{"success":false,"error":"not_found","msg":"Instance not found"}`)
		}, true},
		{"404 bad key", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			io.WriteString(w, `{"success":false,"error":"auth_error","msg":"no user for this api key"}`)
		}, false},
		{"404 html", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			io.WriteString(w, "<html>Not Found</html>")
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newTestClient(t, tt.h, nil)
			_, err := c.ShowInstance(context.Background(), 9)
			if errors.Is(err, ErrNotFound) != tt.gone {
				t.Errorf("show err = %v, gone want %v", err, tt.gone)
			}
			if tt.name == "null" {
				return
			}
			if err := c.DestroyInstance(context.Background(), 9); (err == nil) != tt.gone {
				t.Errorf("destroy err = %v, gone want %v", err, tt.gone)
			}
		})
	}
}

// TestDestroyRefused: 200 {"success": false} is no destroy: tried again,
// and reported when vast keeps refusing.
func TestDestroyRefused(t *testing.T) {
	var n int
	var mu sync.Mutex
	h := func(answers ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			io.WriteString(w, answers[min(n, len(answers)-1)])
			n++
		}
	}
	refused := `{"success":false,"msg":"try later"}`
	c, _ := newTestClient(t, h(refused, `{"success":true}`), nil)
	if err := c.DestroyInstance(context.Background(), 9); err != nil || n != 2 {
		t.Errorf("refused once: err %v after %d calls, want nil after 2", err, n)
	}
	n = 0
	c, _ = newTestClient(t, h(refused), nil)
	err := c.DestroyInstance(context.Background(), 9)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "try later") || n != destroyTries {
		t.Errorf("always refused: err %v after %d calls, want ErrRefused after %d", err, n, destroyTries)
	}
}

// TestListPages: the listing follows next_token over every page with the
// CLI's query, and refuses a token that repeats.
func TestListPages(t *testing.T) {
	var got []string
	c, _ := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.RawQuery)
		switch r.URL.Query().Get("after_token") {
		case "":
			io.WriteString(w, `{"instances":[{"id":1},{"id":2}],"next_token":"t1"}`)
		case "t1":
			io.WriteString(w, `{"instances":[{"id":3}],"next_token":"t2"}`)
		default:
			io.WriteString(w, `{"instances":[],"next_token":null}`)
		}
	}), nil)
	ins, err := c.ListInstances(context.Background())
	if err != nil || len(ins) != 3 || len(got) != 3 {
		t.Fatalf("list = %v, %v after %d pages; want 3 instances, 3 pages", ins, err, len(got))
	}
	if want := `select_filters=%7B%7D&order_by=%5B%7B%22col%22%3A+%22id%22%2C+%22dir%22%3A+%22asc%22%7D%5D&limit=25`; got[0] != want {
		t.Errorf("query %s, want the CLI's %s", got[0], want)
	}
	c, _ = newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"instances":[{"id":1}],"next_token":"same"}`)
	}), nil)
	if _, err := c.ListInstances(context.Background()); err == nil {
		t.Error("a repeating next_token was followed")
	}
}

func TestNewClientRefuses(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8700", "http://[::1]:1", "http://localhost:2", "https://console.vast.ai"} {
		if _, err := NewClient(ClientConfig{BaseURL: u, Key: secret.New("k")}); err != nil {
			t.Errorf("NewClient(%s): %v", u, err)
		}
	}
	for _, cfg := range []ClientConfig{
		{BaseURL: "ftp://x", Key: secret.New("k")},
		{BaseURL: "http://127.0.0.1:1"},
		{BaseURL: "::", Key: secret.New("k")},
		// The key would cross the network in clear text.
		{BaseURL: "http://console.vast.ai", Key: secret.New("k")},
		{BaseURL: "http://203.0.113.5:8700", Key: secret.New("k")},
		// Credentials in the URL would be logged with it.
		{BaseURL: "https://user:secretpw@console.vast.ai", Key: secret.New("k")},
	} {
		if _, err := NewClient(cfg); err == nil {
			t.Errorf("NewClient(%s) = nil error", cfg.BaseURL)
		}
	}
}

// TestRetryAfter: vast's Retry-After on 429, 502, 503 and 504 is waited
// (not the doubling backoff), as seconds or an HTTP date; more than a
// minute, or past the call's deadline, fails the call at once with no
// retry; a create is still not repeated after a 502 or 504.
func TestRetryAfter(t *testing.T) {
	for _, c := range []struct {
		name      string
		status    int
		after     string
		create    bool
		deadline  time.Duration
		wantCalls int
		wantErr   string
		wantWaits []time.Duration
	}{
		{"429 waits it", 429, "5", false, 0, 2, "", []time.Duration{5 * time.Second}},
		{"503 waits it", 503, "2", false, 0, 2, "", []time.Duration{2 * time.Second}},
		{"502 waits it", 502, "3", false, 0, 2, "", []time.Duration{3 * time.Second}},
		{"504 waits it", 504, "4", false, 0, 2, "", []time.Duration{4 * time.Second}},
		{"as an HTTP date", 429, time.Unix(1_800_000_000, 0).Add(7 * time.Second).UTC().Format(http.TimeFormat), false, 0, 2, "", []time.Duration{7 * time.Second}},
		{"over a minute", 429, "61", false, 0, 1, "more than 1m0s: not retried", nil},
		{"past the deadline", 503, "30", false, time.Second, 1, "past this call's deadline", nil},
		{"create after 502", 502, "1", true, 0, 1, "HTTP 502", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"instances":[]}`
			if c.create {
				body = `{"success":true,"new_contract":77}`
			}
			s := &script{statuses: []int{c.status, 200}, body: body, after: c.after}
			cl, waits := newTestClient(t, s, nil)
			ctx := context.Background()
			if c.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.deadline)
				defer cancel()
			}
			var err error
			if c.create {
				_, err = cl.CreateInstance(ctx, 5, CreateRequest{Image: "x", Disk: 16})
			} else {
				_, err = cl.ListInstances(ctx)
			}
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("err = %v, want %q", err, c.wantErr)
			}
			if s.calls != c.wantCalls {
				t.Errorf("%d calls, want %d", s.calls, c.wantCalls)
			}
			if c.wantErr == "" && fmt.Sprint(*waits) != fmt.Sprint(c.wantWaits) {
				t.Errorf("waits = %v, want %v", *waits, c.wantWaits)
			}
		})
	}
}

// TestErrorAnswersClassed: each vast error answer matches the sentinel the
// provider reacts to, and its message says what it means; a 404 that is
// an auth_error is never "not found".
func TestErrorAnswersClassed(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		create bool
		want   error
		text   string
	}{
		{"404 auth_error", 404, `{"success":false,"error":"auth_error","msg":"Invalid or missing API key"}`, false, ErrAuth, "vast refused the API key"},
		{"410 deprecated", 410, `{"success":false,"error":"deprecated_endpoint","msg":"Use /api/v1/instances/ instead"}`, false, ErrDeprecated, "vast retired GET /api/v1/instances/"},
		{"400 billing", 400, `{"success":false,"error":"invalid_args","msg":"Your account balance is too low"}`, true, ErrBilling, "for the account's billing"},
		{"400 blacklisted", 400, `{"success":false,"error":"invalid_args","msg":"You have been blacklisted by this host"}`, true, ErrOfferGone, "blacklisted"},
		{"404 no such ask", 404, `{"success":false,"error":"no_such_ask","msg":"No ask by id 5 is available."}`, true, ErrOfferGone, "No ask"},
		{"410 no longer available", 410, `{"success":false,"error":"no_such_ask","msg":"Instance type 5 is no longer available."}`, true, ErrOfferGone, "no longer available"},
		{"429 quota", 429, `{"success":false,"error":"search_quota_exceeded","msg":"quota"}`, false, ErrQuota, "daily search quota is used up"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &script{statuses: []int{c.status}, errBody: c.body, body: `{}`}
			cl, _ := newTestClient(t, s, nil)
			var err error
			if c.create {
				_, err = cl.CreateInstance(context.Background(), 5, CreateRequest{Image: "x", Disk: 16})
			} else {
				_, err = cl.ListInstances(context.Background())
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Errorf("err = %v, want %v saying %q", err, c.want, c.text)
			}
			if errors.Is(err, ErrNotFound) {
				t.Errorf("err = %v reads as not found", err)
			}
			if s.calls != 1 {
				t.Errorf("%d calls, want 1 (not retried)", s.calls)
			}
		})
	}
}
