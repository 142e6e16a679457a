package enroll

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/ratelimit"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/portcheck"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// testHead is port A on 127.0.0.1 with real TLS and a real port check.
type testHead struct {
	url       string
	ca        *pki.CA
	reg       *registry.Registry
	block     *blocklist.List
	clk       *rvtest.Clock
	logs      *rvtest.Buffer
	mu        sync.Mutex
	destroyed map[string]string // candidate -> reason
	busy      int               // port checks still to answer ErrBusy, as a full gate does
	hold      chan struct{}     // when set, port checks wait until it is closed
	metrics   *metrics.Metrics
}

var nodeTypes = map[string]wire.NodeType{
	"gpu1":  {GPUs: 1, MaxWorkers: 8, Resources: map[string]float64{"a100": 1}, Labels: map[string]string{"zone": "x"}},
	"tiny":  {GPUs: 0, MaxWorkers: 1},
	"bench": {GPUs: 0, MaxWorkers: 1 << 30},
	"a100":  {GPUs: 2, GPUModel: "A100-SXM4", CPUs: 12, MaxWorkers: 8},
}

// testRay is the cluster's Ray and Python; fakeagent's requests match it.
var testRay = wire.RayHead{HeadAddress: "127.0.0.1:6379", Version: "2.53.0", PythonVersion: "3.11"}

var clusterToken = secret.New("cluster-token-Zm9vYmFyYmF6cXV4cXV1eA")

func newHead(t testing.TB) *testHead { return newHeadAt(t, "") }

// newHeadAt keeps the registry at statePath ("" = in memory).
func newHeadAt(t testing.TB, statePath string) *testHead {
	clk := rvtest.NewClock(time.Now())
	ca, _, err := pki.NewCA(nil, "test", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.IssueServer(nil, netip.MustParseAddr("127.0.0.1"), nil, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(registry.Config{Path: statePath, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	h := &testHead{ca: ca, reg: reg, clk: clk, block: blocklist.New(clk.Now), logs: &rvtest.Buffer{}, destroyed: map[string]string{},
		metrics: &metrics.Metrics{}}
	s := New(Config{
		Metrics:  h.metrics,
		Registry: reg, Blocklist: h.block, Limiter: ratelimit.New(10, time.Minute, clk.Now),
		PortCheck: func(ctx context.Context, ip string, ports []int, key []byte) error {
			h.mu.Lock()
			busy := h.busy > 0
			if busy {
				h.busy--
			}
			hold := h.hold
			h.mu.Unlock()
			if hold != nil {
				<-hold
			}
			if busy {
				return fmt.Errorf("%w: test gate full", ErrBusy)
			}
			return portcheck.Check(ctx, portcheck.CheckConfig{}, ip, ports, key)
		},
		CA: ca, NodeTypes: nodeTypes, Agent: []byte("#!agent binary"),
		Bundle: Bundle{ClusterToken: clusterToken, AppID: "app1", AppRootKey: secret.NewBytes(bytes.Repeat([]byte{7}, 32)),
			RayHeadAddress: "127.0.0.1:6379", PortB: 8444, IntervalS: 30, UnheardLimitS: 1800, SelfEnd: wire.ProviderVast},
		Destroy: func(id, reason string) {
			h.mu.Lock()
			h.destroyed[id] = reason
			h.mu.Unlock()
			reg.RequestDestroy(id, reason)
		},
		Log: slog.New(slog.NewTextHandler(h.logs, nil)),
		Now: clk.Now,
		Ray: testRay,
	})
	key, _ := pki.ParseKey(srv.KeyPEM.Reveal())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 2 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srv.Cert.Raw}, PrivateKey: key}}}}
	go hs.ServeTLS(ln, "", "")
	t.Cleanup(func() { hs.Close() })
	h.url = "https://" + ln.Addr().String()
	return h
}

// candidate makes a running candidate at ip with a fake agent answering mode.
func (h *testHead) candidate(t testing.TB, inst, ip, nodeType string, mode fakeagent.Mode) (wire.Candidate, secret.String, *fakeagent.Agent) {
	t.Helper()
	c, tok, err := h.reg.NewCandidate(wire.CandidateRequest{NodeType: nodeType, InstanceID: inst, PublicIP: ip, HostID: "host-" + inst})
	if err != nil {
		t.Fatal(err)
	}
	a, err := fakeagent.Start(ip, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return c, tok, a
}

func (h *testHead) post(t testing.TB, fromIP string, body any) (int, string) {
	t.Helper()
	st, b, err := fakeagent.Post(context.Background(), fakeagent.Client(fromIP, h.ca.Pool(), nil), h.url+"/enroll", body)
	if err != nil {
		t.Fatal(err)
	}
	return st, string(b)
}

func (h *testHead) state(id string) string {
	c, _ := h.reg.Candidate(id)
	return c.State
}

// TestEnrollSuccess follows docs/protocol.md §6 to the 200 bundle and checks it.
func TestEnrollSuccess(t *testing.T) {
	h := newHead(t)
	c, tok, a := h.candidate(t, "inst-ok", "127.0.0.5", "gpu1", fakeagent.Answer)
	st, body := h.post(t, "127.0.0.5", a.Request("inst-ok", tok.Reveal(), 1))
	if st != 200 {
		t.Fatalf("status %d %s", st, body)
	}
	var resp wire.EnrollResponse
	if err := wire.Decode(strings.NewReader(body), 1<<20, &resp); err != nil {
		t.Fatal(err)
	}
	kp, err := fakeagent.KeyPair(resp)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(kp.Certificate[0])
	if id, _ := pki.InstanceID(cert); id != "inst-ok" {
		t.Errorf("cert names %q", id)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: h.ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Error(err)
	}
	if resp.ClusterToken != clusterToken.Reveal() || resp.AppID != "app1" || resp.CACert != string(h.ca.CertPEM) {
		t.Error("bundle secrets/ids wrong")
	}
	r := resp.Ray
	used := map[int]bool{}
	for _, p := range append([]int{r.NodeManagerPort, r.ObjectManagerPort, r.RuntimeEnvAgentPort, r.DashboardAgentGRPCPort,
		r.DashboardAgentListenPort, r.MetricsExportPort, resp.GuestAPI.Port, resp.Mesh.Port}, r.WorkerPorts...) {
		used[p] = true
	}
	for _, p := range a.Ports {
		delete(used, p)
	}
	if len(used) != 0 || len(r.WorkerPorts) != 56 {
		t.Errorf("ports not all from the candidate's 64 or not distinct: extra %v, %d workers", used, len(r.WorkerPorts))
	}
	if r.NumGPUs != 1 || r.Resources["a100"] != 1 || r.Labels["zone"] != "x" || r.NodeIPAddress != "127.0.0.5" {
		t.Errorf("ray params %+v", r)
	}
	if resp.CandidateID != c.CandidateID || resp.NodeType != "gpu1" || r.NodeName != "inst-ok" || r.NumCPUs != 56-4 {
		t.Errorf("bundle identity: candidate_id %q node_type %q node_name %q num_cpus %d; want %q gpu1 inst-ok 52",
			resp.CandidateID, resp.NodeType, r.NodeName, r.NumCPUs, c.CandidateID)
	}
	if resp.Heartbeat.Port != 8444 || resp.Heartbeat.IntervalS != 30 || resp.Heartbeat.UnheardLimitS != 1800 || resp.Heartbeat.SelfEnd != wire.ProviderVast { // the node ends itself unheard that long, on vast with its key
		t.Errorf("heartbeat %+v", resp.Heartbeat)
	}
	if got := h.state(c.CandidateID); got != wire.StateEnrolled {
		t.Errorf("candidate %s, want enrolled", got)
	}
	if n, ok := h.reg.Live("inst-ok"); !ok || n.Serial != pki.SerialHex(cert.SerialNumber) {
		t.Errorf("node serial %q, cert serial %s", n.Serial, pki.SerialHex(cert.SerialNumber))
	}
	// Step 2: already enrolled → the refusal bytes, unless it is the same
	// agent retrying (same token and port_key): a fresh certificate.
	if st, body := h.post(t, "127.0.0.5", otherPortKey(a.Request("inst-ok", tok.Reveal(), 1))); st != 403 || body != `{"error":"refused"}` {
		t.Errorf("second enroll with another port_key: %d %s", st, body)
	}
	st, body = h.post(t, "127.0.0.5", a.Request("inst-ok", tok.Reveal(), 1))
	if st != 200 {
		t.Fatalf("retry by the same agent: %d %s", st, body)
	}
	var again wire.EnrollResponse
	if err := wire.Decode(strings.NewReader(body), 1<<20, &again); err != nil {
		t.Fatal(err)
	}
	kp2, err := fakeagent.KeyPair(again)
	if err != nil {
		t.Fatal(err)
	}
	cert2, _ := x509.ParseCertificate(kp2.Certificate[0])
	if n, _ := h.reg.Live("inst-ok"); n.Serial != pki.SerialHex(cert2.SerialNumber) || n.Serial == pki.SerialHex(cert.SerialNumber) {
		t.Errorf("after the retry the node's serial is %s, want the new %s (old %s)", n.Serial, pki.SerialHex(cert2.SerialNumber), pki.SerialHex(cert.SerialNumber))
	}
	if strings.Contains(h.logs.String(), tok.Reveal()) || strings.Contains(h.logs.String(), clusterToken.Reveal()) {
		t.Error("log contains a secret")
	}
}

// TestMalformed: step 1 answers 400/413/405/404 and destroys nothing; the
// token still works afterwards.
func TestMalformed(t *testing.T) {
	h := newHead(t)
	c, tok, a := h.candidate(t, "inst-m", "127.0.0.6", "gpu1", fakeagent.Answer)
	good := func() wire.EnrollRequest { return a.Request("inst-m", tok.Reveal(), 1) }
	enc := func(r wire.EnrollRequest) []byte { b, _ := json.Marshal(r); return b }
	mut := func(f func(*wire.EnrollRequest)) []byte { r := good(); f(&r); return enc(r) }
	withField := bytes.Replace(enc(good()), []byte(`{"version":2`), []byte(`{"version":2,"extra":true`), 1)
	for _, c := range []struct {
		name string
		body []byte
		want int
	}{
		{"garbage", []byte("{nope"), 400},
		{"empty", nil, 400},
		{"unknown field", withField, 400},
		{"wrong type", bytes.Replace(enc(good()), []byte(`"gpus":1`), []byte(`"gpus":"1"`), 1), 400},
		{"trailing data", append(enc(good()), []byte("{}")...), 400},
		{"63 ports", mut(func(r *wire.EnrollRequest) { r.Ports = r.Ports[:63] }), 400},
		{"65 ports", mut(func(r *wire.EnrollRequest) { r.Ports = append(r.Ports, 1) }), 400},
		{"duplicate port", mut(func(r *wire.EnrollRequest) { r.Ports[1] = r.Ports[0] }), 400},
		{"port 0", mut(func(r *wire.EnrollRequest) { r.Ports[0] = 0 }), 400},
		{"port 65536", mut(func(r *wire.EnrollRequest) { r.Ports[0] = 65536 }), 400},
		{"bad port key", mut(func(r *wire.EnrollRequest) { r.PortKey = "short" }), 400},
		{"bad instance id", mut(func(r *wire.EnrollRequest) { r.InstanceID = "../x" }), 400},
		{"oversize", append([]byte(`{"version":2,"instance_id":"`), bytes.Repeat([]byte("a"), 70<<10)...), 413},
	} {
		t.Run(c.name, func(t *testing.T) {
			if st, body := h.post(t, "127.0.0.6", c.body); st != c.want {
				t.Errorf("status %d %s, want %d", st, body, c.want)
			}
		})
	}
	cl := fakeagent.Client("127.0.0.6", h.ca.Pool(), nil)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/enroll", 405}, {"PUT", "/enroll", 405}, {"POST", "/ca.pem", 405}, {"GET", "/nope", 404},
		{"GET", "/ca.pem", 200}, {"GET", "/bootstrap", 200},
	} {
		req, _ := http.NewRequest(c.method, h.url+c.path, nil)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
	if len(h.destroyed) != 0 || h.state(c.CandidateID) != wire.StateRunning {
		t.Fatalf("bad input destroyed something: %v", h.destroyed)
	}
	if st, body := h.post(t, "127.0.0.6", good()); st != 200 {
		t.Errorf("token dead after bad input: %d %s", st, body)
	}
}

// TestRefusals: step 2 answers the same bytes for every cause, destroys
// nothing, and rate-limits a source IP after 10 refusals.
func TestRefusals(t *testing.T) {
	h := newHead(t)
	c, tok, a := h.candidate(t, "inst-r", "127.0.0.7", "gpu1", fakeagent.Answer)
	ended, tok2, a2 := h.candidate(t, "inst-e", "127.0.0.8", "gpu1", fakeagent.Answer)
	h.reg.End(ended.CandidateID, "deleted")
	other := strings.Repeat("B", 43)
	cases := []struct {
		name, from string
		req        wire.EnrollRequest
	}{
		{"unknown instance", "127.0.0.7", a.Request("inst-unknown", tok.Reveal(), 1)},
		{"wrong source ip", "127.0.0.9", a.Request("inst-r", tok.Reveal(), 1)},
		{"wrong token", "127.0.0.7", a.Request("inst-r", other, 1)},
		{"ended candidate", "127.0.0.8", a2.Request("inst-e", tok2.Reveal(), 1)},
	}
	for _, c := range cases {
		if st, body := h.post(t, c.from, c.req); st != 403 || body != `{"error":"refused"}` {
			t.Errorf("%s: %d %q, want 403 refused", c.name, st, body)
		}
	}
	if len(h.destroyed) != 0 || h.state(c.CandidateID) != wire.StateRunning {
		t.Fatalf("a refusal destroyed something: %v", h.destroyed)
	}
	// 127.0.0.7 has 2 refusals; 8 more are answered 403, then 429.
	for i := 0; i < 8; i++ {
		if st, _ := h.post(t, "127.0.0.7", cases[2].req); st != 403 {
			t.Fatalf("refusal %d got %d before the burst of 10 was used", i+3, st)
		}
	}
	if st, _ := h.post(t, "127.0.0.7", cases[2].req); st != 429 {
		t.Errorf("11th refusal from one ip: %d, want 429", st)
	}
	if st, _ := h.post(t, "127.0.0.9", cases[1].req); st != 403 {
		t.Errorf("another ip was limited too: %d", st)
	}
	if strings.Contains(h.logs.String(), tok.Reveal()) || strings.Contains(h.logs.String(), other) {
		t.Error("a refusal logged the token")
	}
	for _, r := range []string{"unknown_instance", "source_ip", "token", "ended"} {
		if !strings.Contains(h.logs.String(), "reason="+r) {
			t.Errorf("log does not name the refusal reason %s", r)
		}
	}
}

// TestRejections drives steps 4–8: each answers 403 rejected with its reason,
// destroys the candidate and blocklists the host for the class's duration.
func TestRejections(t *testing.T) {
	h := newHead(t)
	day := 24 * time.Hour
	for _, c := range []struct {
		name, reason, class string
		ip                  string
		nodeType            string
		mode                fakeagent.Mode
		mut                 func(*wire.EnrollRequest)
		block               time.Duration
	}{
		{"capabilities", wire.ReasonSecurityCheck, wire.BlockSecurity, "127.0.1.1", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.Checks.Capabilities.OK = false }, 30 * day},
		{"netns", wire.ReasonSecurityCheck, wire.BlockSecurity, "127.0.1.2", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.Checks.Netns.OK = false }, 30 * day},
		{"shm", wire.ReasonSecurityCheck, wire.BlockSecurity, "127.0.1.3", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.Checks.Shm.OK = false }, 30 * day},
		{"gpus", wire.ReasonGPUCount, wire.BlockSecurity, "127.0.1.4", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.GPUs = 2 }, 30 * day},
		{"egress not ok", wire.ReasonEgress, wire.BlockNetwork, "127.0.1.5", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.Checks.Egress.OK = false }, day},
		{"egress other ip", wire.ReasonEgress, wire.BlockNetwork, "127.0.1.6", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.Checks.Egress.IP = "127.0.9.9" }, day},
		{"ports silent", wire.ReasonPortCheck, wire.BlockNetwork, "127.0.1.7", "gpu1", fakeagent.Silent, nil, day},
		{"ports wrong hmac", wire.ReasonPortCheck, wire.BlockNetwork, "127.0.1.8", "gpu1", fakeagent.Wrong, nil, day},
		{"gpu model other", wire.ReasonGPUModel, wire.BlockSecurity, "127.0.1.11", "a100", fakeagent.Answer, func(r *wire.EnrollRequest) {
			r.GPUModels = []string{"NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB"}
		}, 30 * day},
		{"gpu model unknown", wire.ReasonGPUModel, wire.BlockSecurity, "127.0.1.12", "a100", fakeagent.Answer, func(r *wire.EnrollRequest) { r.GPUModels = nil }, 30 * day},
		{"ray too old", wire.ReasonRayVersion, "", "127.0.1.13", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.RayVersion = "2.51.2" }, 0},
		{"ray not the clusters", wire.ReasonRayVersion, "", "127.0.1.14", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.RayVersion = "2.54.0" }, 0},
		{"ray unknown", wire.ReasonRayVersion, "", "127.0.1.15", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.RayVersion = "" }, 0},
		{"python not the clusters", wire.ReasonRayVersion, "", "127.0.1.16", "gpu1", fakeagent.Answer, func(r *wire.EnrollRequest) { r.PythonVersion = "3.12.1" }, 0},
		{"shared ip", wire.ReasonSharedIP, "", "127.0.1.17", "gpu1", fakeagent.Answer, nil, 0},
		{"no slot", wire.ReasonNoSlot, "", "127.0.1.10", "tiny", fakeagent.Answer, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			inst := "inst-" + strings.ReplaceAll(c.name, " ", "-")
			if c.reason == wire.ReasonNoSlot { // fill the one tiny slot first
				_, tok, a := h.candidate(t, "inst-tiny-first", "127.0.1.9", "tiny", fakeagent.Answer)
				if st, body := h.post(t, "127.0.1.9", a.Request("inst-tiny-first", tok.Reveal(), 0)); st != 200 {
					t.Fatalf("first tiny: %d %s", st, body)
				}
			}
			if c.reason == wire.ReasonSharedIP { // a live node on the same public IP first
				_, tok, a := h.candidate(t, "inst-neighbour", c.ip, "gpu1", fakeagent.Answer)
				if st, body := h.post(t, c.ip, a.Request("inst-neighbour", tok.Reveal(), 1)); st != 200 {
					t.Fatalf("neighbour: %d %s", st, body)
				}
			}
			cand, tok, a := h.candidate(t, inst, c.ip, c.nodeType, c.mode)
			req := a.Request(inst, tok.Reveal(), nodeTypes[c.nodeType].GPUs)
			if c.mut != nil {
				c.mut(&req)
			}
			st, body := h.post(t, c.ip, req)
			want := fmt.Sprintf(`{"error":"rejected","reason":%q}`, c.reason)
			if st != 403 || body != want {
				t.Errorf("got %d %s, want 403 %s", st, body, want)
			}
			if got := h.destroyed[cand.CandidateID]; got != c.reason {
				t.Errorf("destroyed with %q, want %q", got, c.reason)
			}
			e, blocked := h.block.Blocked(cand.HostID)
			if c.class == "" {
				if blocked {
					t.Errorf("host blocklisted for %s", c.reason)
				}
				return
			}
			if !blocked || e.Class != c.class || !e.Until.Equal(h.clk.Now().Add(c.block)) {
				t.Errorf("blocklist entry %+v (blocked=%v), want class %s until now+%v", e, blocked, c.class, c.block)
			}
			if st, body := h.post(t, c.ip, req); st != 403 || body != `{"error":"refused"}` {
				t.Errorf("token still works after rejection: %d %s", st, body)
			}
			h.clk.Add(c.block + time.Second)
			if _, still := h.block.Blocked(cand.HostID); still {
				t.Errorf("still blocklisted after %v", c.block)
			}
		})
	}
}

// TestConcurrentSameToken: of N concurrent enrolls with one token exactly
// one gets past the token (docs/protocol.md §6 step 3); the rest get the refusal bytes.
// The winner's port check is held until the others are answered: once it
// completes, the same request is the agent's own retry and rightly gets a
// reissued bundle (step 2, retries), which a free-running race would let
// some of the N be (CI saw two 200s that way).
func TestConcurrentSameToken(t *testing.T) {
	h := newHead(t)
	hold := make(chan struct{})
	h.mu.Lock()
	h.hold = hold
	h.mu.Unlock()
	_, tok, a := h.candidate(t, "inst-c", "127.0.2.1", "gpu1", fakeagent.Answer)
	req := a.Request("inst-c", tok.Reveal(), 1)
	const n = 8
	codes := make(chan int, n)
	for range n {
		go func() {
			st, _, err := fakeagent.Post(context.Background(), fakeagent.Client("127.0.2.1", h.ca.Pool(), nil), h.url+"/enroll", req)
			if err != nil {
				t.Error(err)
			}
			codes <- st
		}()
	}
	got := map[int]int{}
	for range n - 1 {
		got[<-codes]++
	}
	close(hold)
	got[<-codes]++
	if got[200] != 1 || got[403] != n-1 {
		t.Errorf("status counts %v, want one 200 and %d 403", got, n-1)
	}
}

// TestBootstrapAndCA: /ca.pem is exactly the CA, /bootstrap the agent bytes.
func TestBootstrapAndCA(t *testing.T) {
	h := newHead(t)
	cl := fakeagent.Client("127.0.0.1", h.ca.Pool(), nil)
	resp, err := cl.Get(h.url + "/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if cert, err := pki.ParseCert(buf.Bytes()); err != nil || pki.Fingerprint(cert.Raw) != h.ca.Fingerprint() {
		t.Errorf("ca.pem is not exactly the CA: %v", err)
	}
	resp, err = cl.Get(h.url + "/bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if buf.String() != "#!agent binary" || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("bootstrap %q %s", buf.String(), resp.Header.Get("Content-Type"))
	}
	var m strings.Builder
	h.metrics.Write(&m, nil, nil)
	if !strings.Contains(m.String(), "\nrayvast_agent_downloads_total 1\n") {
		t.Errorf("one download, metrics say:\n%s", m.String())
	}
}

// TestConcurrentLastSlot: candidates racing for the one slot of a node type
// get exactly one 200; the others are rejected no_slot and destroyed.
func TestConcurrentLastSlot(t *testing.T) {
	h := newHead(t)
	const n = 4
	type cand struct {
		req wire.EnrollRequest
		ip  string
	}
	var cs []cand
	for i := range n {
		ip := fmt.Sprintf("127.0.7.%d", i+1)
		inst := fmt.Sprintf("race-%d", i)
		_, tok, a := h.candidate(t, inst, ip, "tiny", fakeagent.Answer)
		cs = append(cs, cand{a.Request(inst, tok.Reveal(), 0), ip})
	}
	bodies := make(chan string, n)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b, err := fakeagent.Post(context.Background(), fakeagent.Client(c.ip, h.ca.Pool(), nil), h.url+"/enroll", c.req)
			if err != nil {
				t.Error(err)
			}
			bodies <- fmt.Sprint(st, " ", strings.Contains(string(b), `"reason":"no_slot"`))
		}()
	}
	wg.Wait()
	close(bodies)
	got := map[string]int{}
	for b := range bodies {
		got[b]++
	}
	if got["200 false"] != 1 || got["403 true"] != n-1 {
		t.Errorf("outcomes %v, want one 200 and %d no_slot", got, n-1)
	}
	if len(h.destroyed) != n-1 {
		t.Errorf("destroyed %d, want %d", len(h.destroyed), n-1)
	}
}
