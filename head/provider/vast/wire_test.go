package vast

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// cliRequest is one request of tools/fakevast's CLI fixtures (what vast.py
// sends, written from its source).
type cliRequest struct {
	Name   string          `json:"name"`
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Query  string          `json:"query"`
	Body   json.RawMessage `json:"body"`
}

func cliFixtures(t *testing.T) map[string]cliRequest {
	t.Helper()
	b, err := os.ReadFile("../../../tools/fakevast/fakevast/testdata/cli_requests.json")
	if err != nil {
		t.Fatal(err)
	}
	var list []cliRequest
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]cliRequest{}
	for _, r := range list {
		m[r.Name] = r
	}
	return m
}

type captured struct {
	method, path, query string
	body                []byte
}

type recorder struct {
	mu   sync.Mutex
	reqs []captured
	next http.Handler
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(b))
	r.mu.Lock()
	r.reqs = append(r.reqs, captured{req.Method, req.URL.Path, req.URL.RawQuery, b})
	r.mu.Unlock()
	r.next.ServeHTTP(w, req)
}

// shape is a JSON value's type tree: objects by key, arrays by their first
// element, scalars by kind. Filter operators ("lt" vs "lte") are values of
// the query language, so an object of operators becomes {"op": type}.
func shape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if ops[k] {
				k = "op"
			}
			out[k] = shape(e)
		}
		return out
	case []any:
		if len(x) == 0 {
			return []any{}
		}
		return []any{shape(x[0])}
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

var ops = map[string]bool{"eq": true, "neq": true, "gt": true, "gte": true, "lt": true, "lte": true, "in": true, "notin": true}

// documented are body fields the provider sends beyond the CLI's, named by
// the API reference (create_instance.yaml: target_state).
var documented = map[string]bool{"target_state": true}

// sameShape checks that every field the provider sent is one the CLI sends
// with the same type, and that the CLI's fields named in need are there.
func sameShape(t *testing.T, what string, ours, cli []byte, need ...string) {
	t.Helper()
	var o, c map[string]any
	if err := json.Unmarshal(ours, &o); err != nil {
		t.Fatalf("%s: provider's body is not a JSON object: %s", what, ours)
	}
	if err := json.Unmarshal(cli, &c); err != nil {
		t.Fatalf("%s: fixture body: %v", what, err)
	}
	so, sc := shape(o).(map[string]any), shape(c).(map[string]any)
	for k, v := range so {
		cv, ok := sc[k]
		switch {
		case !ok && documented[k]:
		case !ok:
			t.Errorf("%s: the provider sends %q, the CLI does not", what, k)
		case k == "env":
			// env keys are the rental's own; values are strings in both.
		default:
			a, _ := json.Marshal(v)
			b, _ := json.Marshal(cv)
			if !bytes.Equal(a, b) {
				t.Errorf("%s: %q is %s, the CLI sends %s", what, k, a, b)
			}
		}
	}
	for _, k := range need {
		if _, ok := so[k]; !ok {
			t.Errorf("%s: the provider does not send %q (the CLI does)", what, k)
		}
	}
}

// merged is the union of JSON objects' keys (the first's value wins).
func merged(t *testing.T, objs ...json.RawMessage) []byte {
	t.Helper()
	out := map[string]json.RawMessage{}
	for _, o := range objs {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(o, &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	}
	b, _ := json.Marshal(out)
	return b
}

func queryKeys(raw string) []string {
	q, _ := url.ParseQuery(raw)
	var ks []string
	for k := range q {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestWireMatchesCLI captures the provider's requests on the wire against
// fakevast for search, create, list (over pages) and destroy, and compares
// them with the official CLI's requests (the fixtures): method, path,
// query keys and values, body fields and their JSON types.
func TestWireMatchesCLI(t *testing.T) {
	fx := cliFixtures(t)
	clk := rvtest.NewClock(time.Unix(1_800_000_000, 0))
	offers := fakevast.DefaultOffers(30)
	for i := range offers {
		offers[i].GPUName = "fake cpu" // vast's names have spaces
	}
	fake := fakevast.New(fakevast.Config{Key: testKey, Offers: offers, NoLimits: true, Now: clk.Now})
	rec := &recorder{next: fake.Handler()}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	lim := Limits{}
	c, err := NewClient(ClientConfig{BaseURL: srv.URL, Key: secret.New(testKey), Limits: &lim, Now: clk.Now,
		Sleep: func(ctx context.Context, d time.Duration) error { clk.Add(d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	bl := blocked{{HostID: "1009"}}
	p, err := New(Config{Client: c, Cluster: "w", Blocklist: bl, Now: clk.Now,
		Settings: Settings{Image: "img:1", NodeTypes: map[string]OfferSpec{"cpu": {GPUName: "fake_cpu", MaxDPH: 0.5}}}})
	if err != nil {
		t.Fatal(err)
	}
	p.seen(1009, 2009)
	ctx := context.Background()
	var ids []string
	for i := 0; i < 27; i++ { // more than one page of 25
		r, err := p.Rent(ctx, rentReq(fmt.Sprintf("c-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.InstanceID)
	}
	if rs, err := p.List(ctx); err != nil || len(rs) != 27 {
		t.Fatalf("List = %d rentals, %v; want 27 over two pages", len(rs), err)
	}
	if err := p.Destroy(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}

	var searches, creates, lists, destroys []captured
	for _, r := range rec.reqs {
		switch {
		case r.method == fx["show pending price increases"].Method && r.path == fx["show pending price increases"].Path:
			// List reads them (wire_bid_test.go checks the answers)
		case r.method == "POST" && r.path == "/api/v0/bundles/":
			searches = append(searches, r)
		case r.method == "PUT" && strings.HasPrefix(r.path, "/api/v0/asks/"):
			creates = append(creates, r)
		case r.method == "GET" && r.path == "/api/v1/instances/":
			lists = append(lists, r)
		case r.method == "DELETE" && strings.HasPrefix(r.path, "/api/v0/instances/"):
			destroys = append(destroys, r)
		default:
			t.Errorf("request %s %s?%s has no CLI counterpart here", r.method, r.path, r.query)
		}
	}
	if len(searches) == 0 || len(creates) != 27 || len(lists) < 2 || len(destroys) != 1 {
		t.Fatalf("captured %d searches, %d creates, %d list pages, %d destroys; want ≥1, 27, ≥2, 1", len(searches), len(creates), len(lists), len(destroys))
	}
	lists = lists[len(lists)-2:] // List's two pages (Rent lists too, before its search)

	// The CLI's search with rayvast's fields, and with its quality filters.
	s := merged(t, fx["search offers"].Body, fx["search offers with filters"].Body)
	sameShape(t, "search", searches[0].body, s, "verified", "external", "rentable", "rented", "num_gpus", "gpu_name",
		"dph_total", "direct_port_count", "machine_id", "host_id", "order", "type", "limit", "allocated_storage",
		"reliability2", "cuda_max_good", "inet_down", "inet_up")
	var sq map[string]any
	json.Unmarshal(searches[0].body, &sq)
	if g := sq["gpu_name"].(map[string]any)["eq"]; g != "fake cpu" {
		t.Errorf("gpu_name = %v, want %q (the CLI turns _ into a space)", g, "fake cpu")
	}

	cr := fx["create instance 1"]
	sameShape(t, "create", creates[0].body, cr.Body, "client_id", "image", "env", "disk", "label", "onstart", "runtype", "args", "cancel_unavail")
	var body map[string]any
	json.Unmarshal(creates[0].body, &body)
	if body["onstart"] != "/bin/sh" || body["runtype"] != "args" || fmt.Sprint(body["args"]) != "[-c exec /bin/bootloader]" {
		t.Errorf("create sends onstart %v runtype %v args %v; want the CLI's --entrypoint /bin/sh --args -c …", body["onstart"], body["runtype"], body["args"])
	}
	if _, ok := body["entrypoint"]; ok {
		t.Error("create sends entrypoint: the API has no such field and vast keeps the image's")
	}

	page1, page2 := fx["show instances-v1 page 1"], fx["show instances-v1 page 2"]
	for i, pair := range [][2]string{{lists[0].query, page1.Query}, {lists[1].query, page2.Query}} {
		ours, _ := url.ParseQuery(pair[0])
		cli, _ := url.ParseQuery(pair[1])
		if fmt.Sprint(queryKeys(pair[0])) != fmt.Sprint(queryKeys(pair[1])) {
			t.Errorf("list page %d: query keys %v, the CLI's %v", i+1, queryKeys(pair[0]), queryKeys(pair[1]))
		}
		for _, k := range []string{"select_filters", "order_by"} {
			if ours.Get(k) != cli.Get(k) {
				t.Errorf("list page %d: %s=%s, the CLI sends %s", i+1, k, ours.Get(k), cli.Get(k))
			}
		}
		if ours.Get("limit") != "25" {
			t.Errorf("list page %d: limit=%s, want 25 (the CLI's page)", i+1, ours.Get("limit"))
		}
	}

	d := fx["destroy instance"]
	if !bytes.Equal(bytes.TrimSpace(destroys[0].body), []byte("{}")) || string(d.Body) != "{}" {
		t.Errorf("destroy body %q, the CLI sends %s", destroys[0].body, d.Body)
	}
	if destroys[0].path != "/api/v0/instances/"+ids[0]+"/" {
		t.Errorf("destroy path %s", destroys[0].path)
	}
}
