package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

type fakeRentals struct {
	reg    *registry.Registry
	rented []map[string]string
}

func (f *fakeRentals) Rent(c wire.Candidate, env map[string]string)  { f.rented = append(f.rented, env) }
func (f *fakeRentals) End(id, reason string) (wire.Candidate, error) { return f.reg.End(id, reason) }

type adminT struct {
	c     *http.Client
	reg   *registry.Registry
	block *blocklist.List
	rent  *fakeRentals
	m     *metrics.Metrics
	sock  string
}

func newAdmin(t *testing.T) *adminT {
	reg, _ := registry.Open(registry.Config{})
	a := &adminT{reg: reg, block: blocklist.New(time.Now), rent: &fakeRentals{reg: reg}, m: &metrics.Metrics{}}
	s := New(Config{Registry: reg, Blocklist: a.block, Rentals: a.rent, Metrics: a.m,
		NodeTypes: map[string]wire.NodeType{"gpu1": {GPUs: 1, MaxWorkers: 1}},
		Env:       Env{Head: "198.51.100.1", PortA: 8443, PortB: 8444, BootstrapSHA256: "ab", CASHA256: "cd"}})
	a.sock = filepath.Join(t.TempDir(), statedir.AdminSocket)
	ln, err := Listen(a.sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	a.c = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", a.sock)
	}}}
	return a
}

func (a *adminT) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://head"+path, strings.NewReader(body))
	resp, err := a.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSocketMode(t *testing.T) {
	a := newAdmin(t)
	fi, err := os.Stat(a.sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("admin.sock mode %v %v, want 0600", fi.Mode().Perm(), err)
	}
}

// TestCreate proves the 201 answer carries the token and exactly the
// RAYVAST_* env of docs/protocol.md §2, and the provider gets the same env.
func TestCreate(t *testing.T) {
	a := newAdmin(t)
	st, body := a.do(t, "POST", "/v1/candidates", `{"node_type":"gpu1","instance_id":"i1","public_ip":"127.0.0.5","host_id":"h1"}`)
	if st != 201 {
		t.Fatalf("%d %s", st, body)
	}
	var got wire.CandidateCreated
	json.Unmarshal([]byte(body), &got)
	want := map[string]string{
		wire.EnvHead: "198.51.100.1", wire.EnvPortA: "8443", wire.EnvPortB: "8444", wire.EnvBootstrapSHA256: "ab",
		wire.EnvCASHA256: "cd", wire.EnvJoinToken: got.JoinToken, wire.EnvInstanceID: "i1", wire.EnvPublicIP: "127.0.0.5",
	}
	if len(got.Env) != len(want) {
		t.Errorf("env %v, want %v", got.Env, want)
	}
	for k, v := range want {
		if got.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, got.Env[k], v)
		}
	}
	if len(got.JoinToken) != wire.JoinTokenLen || len(a.rent.rented) != 1 || a.rent.rented[0][wire.EnvJoinToken] != got.JoinToken {
		t.Errorf("token %q, rented %v", got.JoinToken, a.rent.rented)
	}
	st, body = a.do(t, "POST", "/v1/candidates", `{"node_type":"gpu1"}`)
	if st != 201 || strings.Contains(body, wire.EnvInstanceID) {
		t.Errorf("without instance: %d %s", st, body)
	}
}

func TestCreateRefuses(t *testing.T) {
	a := newAdmin(t)
	a.block.Add("bad-host", wire.BlockSecurity, wire.ReasonSecurityCheck)
	for _, c := range []struct {
		name, body string
		want       int
		wantText   string
	}{
		{"blocklisted host", `{"node_type":"gpu1","host_id":"bad-host"}`, 409, "blocklisted"},
		{"unknown node type", `{"node_type":"tpu"}`, 400, "unknown node_type"},
		{"unknown field", `{"node_type":"gpu1","x":1}`, 400, "unknown field"},
		{"wrong type", `{"node_type":1}`, 400, "node_type"},
		{"bad ip", `{"node_type":"gpu1","public_ip":"nope"}`, 400, "public_ip"},
		{"bad instance", `{"node_type":"gpu1","instance_id":"a b"}`, 400, "instance_id"},
		{"oversize", `{"node_type":"` + strings.Repeat("a", 70<<10) + `"}`, 413, ""},
	} {
		if st, body := a.do(t, "POST", "/v1/candidates", c.body); st != c.want || !strings.Contains(body, c.wantText) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, st, body, c.want, c.wantText)
		}
	}
	if len(a.rent.rented) != 0 {
		t.Errorf("refused creations were rented: %d", len(a.rent.rented))
	}
}

func TestPatchDeleteList(t *testing.T) {
	a := newAdmin(t)
	_, body := a.do(t, "POST", "/v1/candidates", `{"node_type":"gpu1"}`)
	var cc wire.CandidateCreated
	json.Unmarshal([]byte(body), &cc)
	path := "/v1/candidates/" + cc.CandidateID
	if st, body := a.do(t, "PATCH", path, `{"instance_id":"i7"}`); st != 200 || !strings.Contains(body, `"state":"rented"`) {
		t.Errorf("patch instance: %d %s", st, body)
	}
	if st, body := a.do(t, "PATCH", path, `{"public_ip":"127.0.0.7","host_id":"h7"}`); st != 200 || !strings.Contains(body, `"state":"running"`) {
		t.Errorf("patch ip: %d %s", st, body)
	}
	if st, _ := a.do(t, "PATCH", path, `{"instance_id":"other"}`); st != 409 {
		t.Errorf("re-patch: %d, want 409", st)
	}
	if st, _ := a.do(t, "PATCH", "/v1/candidates/c-nope", `{"host_id":"x"}`); st != 404 {
		t.Errorf("patch unknown: %d, want 404", st)
	}
	if st, _ := a.do(t, "DELETE", path, ""); st != 204 {
		t.Errorf("delete: %d", st)
	}
	if st, _ := a.do(t, "DELETE", "/v1/candidates/c-nope", ""); st != 404 {
		t.Errorf("delete unknown: %d", st)
	}
	st, body := a.do(t, "GET", "/v1/candidates", "")
	var list []wire.Candidate
	if err := json.Unmarshal([]byte(body), &list); st != 200 || err != nil || len(list) != 1 || list[0].State != wire.StateEnded {
		t.Errorf("list: %d %s", st, body)
	}
	for _, p := range []string{"/v1/nodes", "/v1/blocklist"} {
		if st, body := a.do(t, "GET", p, ""); st != 200 || strings.TrimSpace(body) != "[]" {
			t.Errorf("GET %s: %d %q, want an empty JSON list", p, st, body)
		}
	}
	if st, _ := a.do(t, "PUT", "/v1/nodes", ""); st != 405 {
		t.Errorf("PUT /v1/nodes: %d, want 405", st)
	}
}

func TestMetrics(t *testing.T) {
	a := newAdmin(t)
	a.do(t, "POST", "/v1/candidates", `{"node_type":"gpu1","instance_id":"i1","public_ip":"127.0.0.5"}`)
	a.m.Enrollment(metrics.OutcomeRefused)
	a.m.Refusal("enroll", "token")
	a.m.Heartbeat()
	a.m.Heartbeat()
	st, body := a.do(t, "GET", "/metrics", "")
	for _, want := range []string{
		`rayvast_candidates{state="running"} 1`,
		`rayvast_nodes{state="enrolled"} 0`,
		`rayvast_enrollments_total{outcome="refused"} 1`,
		`rayvast_refusals_total{endpoint="enroll",reason="token"} 1`,
		`rayvast_heartbeats_total 2`,
		`# TYPE rayvast_heartbeats_total counter`,
	} {
		if !strings.Contains(body, want+"\n") && !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if st != 200 || !bytes.HasPrefix([]byte(body), []byte("# HELP")) {
		t.Errorf("metrics %d", st)
	}
}

// TestProviderStatus: GET /v1/provider answers the provider's own account
// of why it rents nothing (here vast's daily search quota), and kind none
// without a built-in provider.
func TestProviderStatus(t *testing.T) {
	a := newAdmin(t)
	if st, body := a.do(t, "GET", "/v1/provider", ""); st != 200 || strings.TrimSpace(body) != `{"kind":"none"}` {
		t.Errorf("no provider: %d %s", st, body)
	}
	reset := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	reg, _ := registry.Open(registry.Config{})
	s := New(Config{Registry: reg, Blocklist: blocklist.New(time.Now), Rentals: &fakeRentals{reg: reg},
		Provider: func() wire.ProviderStatus {
			return wire.ProviderStatus{Kind: "vast", Halted: "search_quota_exceeded", Until: &reset}
		}})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/provider", nil))
	want := `{"kind":"vast","halted":"search_quota_exceeded","until":"2026-12-02T00:00:00Z"}`
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("vast halted: %d %s, want %s", rec.Code, rec.Body.String(), want)
	}
}

// TestCreatePaused: with Paused set (Ray's autoscaler owns the count), a
// candidate of a paused node type is refused 409 node_type_paused and not
// rented; other types are created as before.
func TestCreatePaused(t *testing.T) {
	reg, _ := registry.Open(registry.Config{})
	rent := &fakeRentals{reg: reg}
	s := New(Config{Registry: reg, Blocklist: blocklist.New(time.Now), Rentals: rent,
		NodeTypes: map[string]wire.NodeType{"gpu1": {GPUs: 1, MaxWorkers: 1}, "cpu": {MaxWorkers: 1}},
		Paused:    func(n string) bool { return n == "gpu1" }})
	for _, c := range []struct {
		body     string
		want     int
		wantText string
	}{
		{`{"node_type":"gpu1"}`, 409, `"error":"node_type_paused"`},
		{`{"node_type":"cpu"}`, 201, `"candidate_id"`},
	} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/candidates", strings.NewReader(c.body)))
		if rec.Code != c.want || !strings.Contains(rec.Body.String(), c.wantText) {
			t.Errorf("%s: %d %s, want %d with %s", c.body, rec.Code, rec.Body.String(), c.want, c.wantText)
		}
	}
	if len(rent.rented) != 1 {
		t.Errorf("rented %d, want 1 (the cpu candidate only)", len(rent.rented))
	}
}
