package enroll

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/head/ratelimit"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestRateLimitOnlyRefusals: vast hosts share public IPs, so a co-tenant can
// send refusals from the very IP a real candidate enrolls from. The limit
// must turn only refusals into 429: the candidate's own good request still
// enrolls, and a malformed request is still told it is malformed.
func TestRateLimitOnlyRefusals(t *testing.T) {
	h := newHead(t)
	const ip = "127.0.4.1"
	_, tok, a := h.candidate(t, "inst-shared", ip, "gpu1", fakeagent.Answer)
	junk := a.Request("inst-shared", strings.Repeat("C", 43), 1)
	for i := range 10 {
		if st, body := h.post(t, ip, junk); st != 403 || body != `{"error":"refused"}` {
			t.Fatalf("refusal %d: %d %s, want 403 refused", i+1, st, body)
		}
	}
	if st, _ := h.post(t, ip, junk); st != 429 {
		t.Fatalf("11th refusal: %d, want 429", st)
	}
	if st, body := h.post(t, ip, []byte("{nope")); st != 400 {
		t.Errorf("malformed from a limited ip: %d %s, want 400", st, body)
	}
	if st, body := h.post(t, ip, a.Request("inst-shared", tok.Reveal(), 1)); st != 200 {
		t.Errorf("the real candidate behind a limited shared ip: %d %s, want 200", st, body)
	}
}

// TestOversizeIs413: docs/protocol.md §4 says any body over 64 KiB is 413, whatever it
// holds; a large body of garbage must not be answered 400.
func TestOversizeIs413(t *testing.T) {
	h := newHead(t)
	cl := fakeagent.Client("127.0.4.2", h.ca.Pool(), nil)
	for _, c := range []struct {
		name  string
		body  []byte
		chunk bool // no Content-Length
	}{
		{"garbage with length", bytes.Repeat([]byte("x"), 70<<10), false},
		{"garbage chunked", bytes.Repeat([]byte("x"), 70<<10), true},
		{"json then 64 KiB of junk", append([]byte(`{"version":2}`), bytes.Repeat([]byte("!"), 65<<10)...), false},
		{"just over", bytes.Repeat([]byte(" "), wire.MaxBody+1), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(c.body)
			if c.chunk {
				body = io.MultiReader(body) // hides the length: chunked
			}
			req, _ := http.NewRequest("POST", h.url+"/enroll", body)
			req.Header.Set("Content-Type", "application/json")
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 413 {
				t.Errorf("status %d %s, want 413", resp.StatusCode, b)
			}
		})
	}
	// Exactly 64 KiB is allowed: it is judged on its content (400 here).
	exact := append([]byte(`{"version":2}`), bytes.Repeat([]byte(" "), wire.MaxBody-len(`{"version":2}`))...)
	if st, body := h.post(t, "127.0.4.2", exact); st != 400 {
		t.Errorf("64 KiB body: %d %s, want 400", st, body)
	}
}

// TestUncleanPaths404: a path the table does not name is 404, including
// spellings that would clean to a known path (no 301 redirect dance).
func TestUncleanPaths404(t *testing.T) {
	h := newHead(t)
	cl := fakeagent.Client("127.0.4.3", h.ca.Pool(), nil)
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	host := strings.TrimPrefix(h.url, "https://")
	for _, c := range []struct{ method, path string }{
		{"POST", "//enroll"}, {"POST", "/./enroll"}, {"POST", "/x/../enroll"}, {"GET", "/ca.pem/"},
		{"GET", "//bootstrap"}, {"POST", "/enroll/"}, {"GET", "/CA.PEM"},
	} {
		req, _ := http.NewRequest(c.method, h.url+"/", strings.NewReader("{}"))
		req.URL.Opaque = "//" + host + c.path // sent as written
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s %s: %d, want 404", c.method, c.path, resp.StatusCode)
		}
	}
}

// TestDecisionOrder: when several checks fail at once the first failing
// step of docs/protocol.md §6 names the reason (4 security, 5 gpus, 6 egress, 7 ports).
func TestDecisionOrder(t *testing.T) {
	h := newHead(t)
	bad := wire.Check{OK: false, Detail: "no"}
	for i, c := range []struct {
		name, want string
		mode       fakeagent.Mode
		mut        func(*wire.EnrollRequest)
	}{
		{"all bad", wire.ReasonSecurityCheck, fakeagent.Silent, func(r *wire.EnrollRequest) {
			r.Checks.Shm, r.GPUs, r.Checks.Egress.OK = bad, 3, false
		}},
		{"gpus egress ports", wire.ReasonGPUCount, fakeagent.Silent, func(r *wire.EnrollRequest) { r.GPUs, r.Checks.Egress.IP = 0, "127.9.9.9" }},
		{"egress ports", wire.ReasonEgress, fakeagent.Wrong, func(r *wire.EnrollRequest) { r.Checks.Egress.IP = "127.9.9.9" }},
		{"ports", wire.ReasonPortCheck, fakeagent.Wrong, func(r *wire.EnrollRequest) {}},
	} {
		ip := fmt.Sprintf("127.0.5.%d", i+1)
		inst := fmt.Sprintf("order-%d", i)
		_, tok, a := h.candidate(t, inst, ip, "gpu1", c.mode)
		req := a.Request(inst, tok.Reveal(), 1)
		c.mut(&req)
		want := fmt.Sprintf(`{"error":"rejected","reason":%q}`, c.want)
		if st, body := h.post(t, ip, req); st != 403 || body != want {
			t.Errorf("%s: %d %s, want %s", c.name, st, body, want)
		}
	}
}

// TestEgressIPForms: the egress IP is compared as an address, not as text:
// a v4-mapped v6 spelling of the public IP passes, another address fails.
func TestEgressIPForms(t *testing.T) {
	h := newHead(t)
	for i, c := range []struct {
		public, egress string
		ok             bool
	}{
		{"127.0.6.1", "::ffff:127.0.6.1", true},
		{"::ffff:127.0.6.2", "127.0.6.2", true}, // admin gave the mapped form
		{"127.0.6.3", "127.0.6.03", false},      // not an IP literal
		{"127.0.6.4", "", false},
		{"127.0.6.5", "::ffff:127.0.6.55", false},
	} {
		inst := fmt.Sprintf("egress-%d", i)
		src := strings.TrimPrefix(c.public, "::ffff:")
		_, tok, a := h.candidate(t, inst, c.public, "tiny", fakeagent.Answer)
		a.IP = src
		req := a.Request(inst, tok.Reveal(), 0)
		req.Checks.Egress.IP = c.egress
		st, body := h.post(t, src, req)
		if got := !strings.Contains(body, `"reason":"egress"`); got != c.ok {
			t.Errorf("public %s egress %q: %d %s, want egress ok=%v", c.public, c.egress, st, body, c.ok)
		}
		if st == 200 { // free the one tiny slot for the next case
			h.reg.End(h.candidateOf(inst), "test")
		}
	}
}

func (h *testHead) candidateOf(inst string) string {
	for _, c := range h.reg.Candidates() {
		if c.InstanceID == inst {
			return c.CandidateID
		}
	}
	return ""
}

// TestNoSecretInLogs: after an enrollment, a rejection and refusals, the
// head's log holds none of the secrets that crossed port A.
func TestNoSecretInLogs(t *testing.T) {
	h := newHead(t)
	_, tok, a := h.candidate(t, "sec-ok", "127.0.8.1", "gpu1", fakeagent.Answer)
	st, body := h.post(t, "127.0.8.1", a.Request("sec-ok", tok.Reveal(), 1))
	if st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	var resp wire.EnrollResponse
	if err := wire.Decode(strings.NewReader(body), 1<<20, &resp); err != nil {
		t.Fatal(err)
	}
	_, tok2, a2 := h.candidate(t, "sec-bad", "127.0.8.2", "gpu1", fakeagent.Wrong)
	h.post(t, "127.0.8.2", a2.Request("sec-bad", tok2.Reveal(), 1))
	_, tok3, a3 := h.candidate(t, "sec-ref", "127.0.8.3", "gpu1", fakeagent.Answer)
	h.post(t, "127.0.8.4", a3.Request("sec-ref", tok3.Reveal(), 1)) // wrong source ip
	h.post(t, "127.0.8.3", []byte(`{"version":2,"instance_id":"sec-ref","join_token":"`+tok3.Reveal()+`","gpus":"x"}`))
	logs := h.logs.String()
	keyBody := strings.Split(resp.NodeKey, "\n")[1]
	for name, s := range map[string]string{
		"join token": tok.Reveal(), "rejected join token": tok2.Reveal(), "refused join token": tok3.Reveal(),
		"port key": req64(a.PortKey), "cluster token": resp.ClusterToken, "app root key": resp.AppRootKey, "node key": keyBody,
	} {
		if strings.Contains(logs, s) {
			t.Errorf("log holds the %s", name)
		}
	}
}

// otherPortKey is req from someone else holding the token: a port_key
// other than the one that consumed it (the same one is a retry, §6 step 2).
func otherPortKey(req wire.EnrollRequest) wire.EnrollRequest {
	req.PortKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	return req
}

func req64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// TestRefusalsIdentical: the four refusals before a valid token answer the
// same status, headers (but Date) and body, so a stranger learns nothing.
func TestRefusalsIdentical(t *testing.T) {
	h := newHead(t)
	_, tok, a := h.candidate(t, "same-1", "127.0.9.1", "gpu1", fakeagent.Answer)
	ended, tok2, a2 := h.candidate(t, "same-2", "127.0.9.2", "gpu1", fakeagent.Answer)
	h.reg.End(ended.CandidateID, "deleted")
	_, tok3, a3 := h.candidate(t, "same-3", "127.0.9.3", "tiny", fakeagent.Answer)
	if st, body := h.post(t, "127.0.9.3", a3.Request("same-3", tok3.Reveal(), 0)); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	var first string
	for _, c := range []struct {
		name, from string
		req        wire.EnrollRequest
	}{
		{"unknown", "127.0.9.1", a.Request("same-x", tok.Reveal(), 1)},
		{"ended", "127.0.9.2", a2.Request("same-2", tok2.Reveal(), 1)},
		{"source ip", "127.0.9.9", a.Request("same-1", tok.Reveal(), 1)},
		{"token", "127.0.9.1", a.Request("same-1", strings.Repeat("D", 43), 1)},
		{"enrolled", "127.0.9.3", otherPortKey(a3.Request("same-3", tok3.Reveal(), 0))},
	} {
		b, _ := json.Marshal(c.req)
		req, _ := http.NewRequest("POST", h.url+"/enroll", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := fakeagent.Client(c.from, h.ca.Pool(), nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Header.Del("Date")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := fmt.Sprintf("%s %d %v %s", resp.Proto, resp.StatusCode, resp.Header, body)
		if first == "" {
			first = got
			if resp.StatusCode != 403 || string(body) != `{"error":"refused"}` {
				t.Fatalf("refusal: %s", got)
			}
		}
		if got != first {
			t.Errorf("%s: %s, want the same answer as the others: %s", c.name, got, first)
		}
	}
}

// TestConcurrentRefusalsBurst: refusals arriving at once from one IP get
// exactly the burst of 10 answered 403; the rest are 429.
func TestConcurrentRefusalsBurst(t *testing.T) {
	h := newHead(t)
	const ip, n = "127.0.10.1", 40
	_, _, a := h.candidate(t, "burst", ip, "gpu1", fakeagent.Answer)
	b, _ := json.Marshal(a.Request("burst", strings.Repeat("E", 43), 1))
	cl := fakeagent.Client(ip, h.ca.Pool(), nil)
	cl.Transport.(*http.Transport).MaxConnsPerHost = 0
	start := make(chan struct{})
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			st, _, err := fakeagent.Post(context.Background(), cl, h.url+"/enroll", b)
			if err != nil {
				t.Error(err)
			}
			codes <- st
		})
	}
	close(start)
	wg.Wait()
	close(codes)
	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	if got[403] != 10 || got[429] != n-10 {
		t.Errorf("status counts %v, want 10 x 403 and %d x 429", got, n-10)
	}
}

// TestPortCheckTarget: the port check dials the candidate's recorded public
// IP (canonical form, whatever spelling the admin or the socket used) with
// exactly the ports of the request, and the head's secrets never reach it.
func TestPortCheckTarget(t *testing.T) {
	ca, _, _ := pki.NewCA(nil, "t", time.Now())
	reg, _ := registry.Open(registry.Config{})
	_, tok, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "tiny", InstanceID: "pc", PublicIP: "::ffff:192.0.2.7"})
	var gotIP string
	var gotPorts []int
	s := New(Config{Registry: reg, Blocklist: blocklist.New(time.Now), Limiter: ratelimit.New(10, time.Second, nil),
		PortCheck: func(_ context.Context, ip string, ports []int, _ []byte) error {
			gotIP, gotPorts = ip, ports
			return nil
		},
		CA: ca, NodeTypes: nodeTypes, Destroy: func(string, string) { t.Error("destroyed") }})
	ports := make([]int, 64)
	for i := range ports {
		ports[i] = 30000 + 3*i
	}
	ok := wire.Check{OK: true}
	body, _ := json.Marshal(wire.EnrollRequest{Version: 2, InstanceID: "pc", JoinToken: tok.Reveal(), GPUs: 0, Ports: ports, RayVersion: "2.53.0",
		PortKey: base64.StdEncoding.EncodeToString(make([]byte, 32)),
		Checks:  wire.Checks{Capabilities: ok, Netns: ok, Shm: ok, Egress: wire.EgressCheck{OK: true, IP: "192.0.2.7"}}})
	req := httptest.NewRequest("POST", "/enroll", bytes.NewReader(body))
	req.RemoteAddr = "[::ffff:192.0.2.7]:5555"
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if gotIP != "192.0.2.7" || !slices.Equal(gotPorts, ports) {
		t.Errorf("port check dialled %s %v, want 192.0.2.7 and the request's ports", gotIP, gotPorts)
	}
}
