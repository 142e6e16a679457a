package fakevast

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// memBackend records launches.
type memBackend struct {
	mu       sync.Mutex
	launches map[int64]Launch
	stopped  map[int64]bool
}

func (m *memBackend) Start(_ context.Context, l Launch) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.launches[l.ID] = l
	return "198.51.100.7", nil
}
func (m *memBackend) Stop(_ context.Context, id int64) error {
	m.mu.Lock()
	m.stopped[id] = true
	m.mu.Unlock()
	return nil
}
func (m *memBackend) Kill(context.Context, int64) error { return nil }

type api struct {
	t   *testing.T
	url string
	key string
}

func (a api) call(method, path, body string) (int, map[string]any) {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// TestLifecycle: search → create → loading → running with a public IP and
// the 64 identical ports → list by label → destroy → 404; the backend got the
// env without the "-p" keys and the command; the offer is rented meanwhile.
func TestLifecycle(t *testing.T) {
	clk := rvtest.NewClock(time.Unix(1_800_000_000, 0))
	be := &memBackend{launches: map[int64]Launch{}, stopped: map[int64]bool{}}
	s := New(Config{Key: "k", StartDelay: 10 * time.Second, Backend: be, Now: clk.Now, Offers: DefaultOffers(2), NoLimits: true})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	a := api{t, srv.URL, "k"}

	q := url.QueryEscape(`{"num_gpus":{"eq":0},"rented":{"eq":false},"host_id":{"notin":[1001]},"order":[["dph_total","asc"]]}`)
	st, m := a.call("GET", "/api/v0/bundles/?q="+q, "")
	offers, _ := m["offers"].([]any)
	if st != 200 || len(offers) != 1 || offers[0].(map[string]any)["host_id"].(float64) != 1002 {
		t.Fatalf("search: %d %v", st, m)
	}
	st, m = a.call("PUT", "/api/v0/asks/5002/", `{"image":"img","label":"rayvast:c:x1","runtype":"args","onstart":"/bin/sh","args":["-c","echo hi"],"env":{"A":"1","-p 70000:70000":"1","-p 70001:70001":"1","-p 8080:8080":"1"}}`)
	if st != 200 || m["success"] != true {
		t.Fatalf("create: %d %v", st, m)
	}
	id := int64(m["new_contract"].(float64))
	path := "/api/v0/instances/" + jsonNum(id) + "/"
	s.Wait()
	if _, m = a.call("GET", path, ""); m["instances"].(map[string]any)["actual_status"] != nil {
		t.Errorf("fresh instance status = %v, want null", m["instances"].(map[string]any)["actual_status"])
	}
	clk.Add(6 * time.Second)
	if _, m = a.call("GET", path, ""); m["instances"].(map[string]any)["actual_status"] != "loading" || m["instances"].(map[string]any)["public_ipaddr"] != "" {
		t.Errorf("loading instance: %v", m["instances"])
	}
	clk.Add(5 * time.Second)
	_, m = a.call("GET", path, "")
	in := m["instances"].(map[string]any)
	if in["actual_status"] != "running" || in["public_ipaddr"] != "198.51.100.7" || in["label"] != "rayvast:c:x1" || in["host_id"].(float64) != 1002 {
		t.Errorf("running instance: %v", in)
	}
	if n := len(in["ports"].(map[string]any)); n != 2 {
		t.Errorf("ports = %d, want the 2 identity ports asked for", n)
	}
	l := be.launches[id]
	if l.Env["A"] != "1" || len(l.Env) != 1 || l.Entrypoint != "/bin/sh" || strings.Join(l.Args, " ") != "-c echo hi" || len(l.Ports) != 2 {
		t.Errorf("launch = %+v", l)
	}
	if st, m = a.call("PUT", "/api/v0/asks/5002/", `{"image":"img"}`); st != 404 || m["error"] != "no_such_ask" {
		t.Errorf("second create on a rented offer: %d %v, want 404 no_such_ask (the reference's offer not found)", st, m)
	}
	_, m = a.call("GET", "/api/v0/instances/", "")
	if len(m["instances"].([]any)) != 1 {
		t.Errorf("list: %v", m)
	}
	if st, _ = a.call("DELETE", path, ""); st != 200 || !be.stopped[id] {
		t.Errorf("destroy: %d stopped=%v", st, be.stopped[id])
	}
	if st, m = a.call("GET", path, ""); st != 200 || m["instances"] != nil {
		t.Errorf("show gone instance: %d %v, want 200 {instances: null}", st, m)
	}
	if st, m = a.call("DELETE", path, ""); st != 404 || m["error"] != "not_found" {
		t.Errorf("destroy gone instance: %d %v, want 404 not_found", st, m)
	}
	if st, _ = a.call("PUT", "/api/v0/asks/5002/", `{"image":"img"}`); st != 200 {
		t.Errorf("offer not free after destroy: %d", st)
	}
}

// TestAuthAndRateLimit: a wrong key is 404 auth_error (as vast answers
// it); two calls to one endpoint closer
// than MinInterval give 429 (plain text, as vast), other endpoints are not
// affected, and after the interval it answers again.
func TestAuthAndRateLimit(t *testing.T) {
	clk := rvtest.NewClock(time.Unix(1_800_000_000, 0))
	s := New(Config{Key: "k", MinInterval: time.Second, Now: clk.Now})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	if st, m := (api{t, srv.URL, "wrong"}).call("GET", "/api/v0/instances/", ""); st != 404 || m["error"] != "auth_error" {
		t.Errorf("wrong key: %d %v, want 404 auth_error", st, m)
	}
	a := api{t, srv.URL, "k"}
	clk.Add(time.Minute)
	if st, _ := a.call("GET", "/api/v0/instances/", ""); st != 200 {
		t.Errorf("first: %d", st)
	}
	if st, _ := a.call("GET", "/api/v0/instances/", ""); st != 429 {
		t.Errorf("second at once: %d, want 429", st)
	}
	if st, _ := a.call("GET", "/api/v0/bundles/", ""); st != 200 {
		t.Errorf("other endpoint: %d, want 200", st)
	}
	clk.Add(2 * time.Second)
	if st, _ := a.call("GET", "/api/v0/instances/", ""); st != 200 {
		t.Errorf("after the interval: %d", st)
	}
	if _, limited := s.Stats(); limited != 1 {
		t.Errorf("limited = %d, want 1", limited)
	}
}

func jsonNum(id int64) string { b, _ := json.Marshal(id); return string(b) }

// TestSearchShapes: the three documented search shapes give the same
// answer; a bad operator is a 400 with vast's error body.
func TestSearchShapes(t *testing.T) {
	s := New(Config{Key: "k", NoLimits: true})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	a := api{t, srv.URL, "k"}
	q := `{"host_id":{"in":[1003,1005]},"order":[["dph_total","desc"]],"limit":5}`
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v0/bundles/?q=" + url.QueryEscape(q), ""},
		{"POST", "/api/v0/bundles/", q},
		{"PUT", "/api/v0/search/asks/", `{"q":` + q + `}`},
	} {
		st, m := a.call(c.method, c.path, c.body)
		offers, _ := m["offers"].([]any)
		if st != 200 || len(offers) != 2 || offers[0].(map[string]any)["host_id"].(float64) != 1005 {
			t.Errorf("%s %s: %d %v", c.method, c.path, st, m)
		}
	}
	if st, m := a.call("POST", "/api/v0/bundles/", `{"num_gpus":{"like":1}}`); st != 400 || m["error"] != "invalid_args" {
		t.Errorf("bad operator: %d %v", st, m)
	}
}

// TestVastLimits: by default the fake keeps vast's documented limits:
// create 4.5 s apart and 12 s more after a 429, search 10 a minute, show 2
// s, destroy 3 s; endpoints do not share a limit.
func TestVastLimits(t *testing.T) {
	clk := rvtest.NewClock(time.Unix(1_800_000_000, 0))
	s := New(Config{Key: "k", Now: clk.Now, Offers: DefaultOffers(20)})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	a := api{t, srv.URL, "k"}
	create := func(offer int) int {
		st, _ := a.call("PUT", "/api/v0/asks/"+jsonNum(int64(offer))+"/", `{"image":"img","disk":16}`)
		return st
	}
	if st := create(5001); st != 200 {
		t.Fatalf("first create: %d", st)
	}
	clk.Add(4 * time.Second)
	if st := create(5002); st != 429 {
		t.Errorf("create 4 s later: %d, want 429", st)
	}
	clk.Add(5 * time.Second) // 5 s after the last try, but inside its 12 s penalty
	if st := create(5002); st != 429 {
		t.Errorf("create inside the penalty: %d, want 429", st)
	}
	clk.Add(13 * time.Second)
	if st := create(5002); st != 200 {
		t.Errorf("create after the penalty: %d, want 200", st)
	}
	for i := 0; i < 10; i++ {
		clk.Add(time.Second)
		if st, _ := a.call("POST", "/api/v0/bundles/", `{}`); st != 200 {
			t.Fatalf("search %d of 10 in a minute: %d", i+1, st)
		}
	}
	if st, _ := a.call("POST", "/api/v0/bundles/", `{}`); st != 429 {
		t.Errorf("11th search in a minute: %d, want 429", st)
	}
	clk.Add(time.Minute)
	if st, _ := a.call("PUT", "/api/v0/search/asks/", `{"q":{}}`); st != 200 {
		t.Errorf("search a minute later: %d", st)
	}
	clk.Add(time.Second)
	if st, _ := a.call("GET", "/api/v0/instances/31000001/", ""); st != 200 {
		t.Errorf("show: %d", st)
	}
	clk.Add(1500 * time.Millisecond)
	if st, _ := a.call("GET", "/api/v0/instances/31000002/", ""); st != 429 {
		t.Errorf("show of another instance 1.5 s later: %d, want 429 (one limit for every id)", st)
	}
	if st, _ := a.call("DELETE", "/api/v0/instances/31000001/", "{}"); st != 200 {
		t.Errorf("destroy: %d", st)
	}
	clk.Add(2 * time.Second)
	if st, _ := a.call("DELETE", "/api/v0/instances/31000002/", "{}"); st != 429 {
		t.Errorf("destroy 2 s later: %d, want 429", st)
	}
}

// TestRefusedDestroy: a refused destroy is 200 {"success": false} and
// leaves the instance billing; the next one destroys it.
func TestRefusedDestroy(t *testing.T) {
	s := New(Config{Key: "k", NoLimits: true, RefuseDestroys: 1})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	a := api{t, srv.URL, "k"}
	if st, _ := a.call("PUT", "/api/v0/asks/5001/", `{"image":"img","disk":16}`); st != 200 {
		t.Fatal(st)
	}
	if st, m := a.call("DELETE", "/api/v0/instances/31000001/", "{}"); st != 200 || m["success"] != false || len(s.Live()) != 1 {
		t.Errorf("first destroy: %d %v live=%d, want refused", st, m, len(s.Live()))
	}
	if st, m := a.call("DELETE", "/api/v0/instances/31000001/", "{}"); st != 200 || m["success"] != true || len(s.Live()) != 0 {
		t.Errorf("second destroy: %d %v live=%d", st, m, len(s.Live()))
	}
}
