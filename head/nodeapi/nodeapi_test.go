package nodeapi

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

type portB struct {
	url string
	ca  *pki.CA
	reg *registry.Registry
	srv *Server
	clk *rvtest.Clock
}

func newPortB(t testing.TB, opts ...func(*Config)) *portB {
	clk := rvtest.NewClock(time.Now())
	ca, _, err := pki.NewCA(nil, "test", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := ca.IssueServer(nil, netip.MustParseAddr("127.0.0.1"), nil, clk.Now())
	key, _ := pki.ParseKey(sc.KeyPEM.Reveal())
	reg, _ := registry.Open(registry.Config{Now: clk.Now})
	cfg := Config{Registry: reg, CA: ca.Pool(), Interval: 10 * time.Second, Now: clk.Now}
	for _, o := range opts {
		o(&cfg)
	}
	s := New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler(), TLSConfig: s.TLSConfig(tls.Certificate{Certificate: [][]byte{sc.Cert.Raw}, PrivateKey: key})}
	go hs.ServeTLS(ln, "", "")
	t.Cleanup(func() { hs.Close() })
	return &portB{url: "https://" + ln.Addr().String(), ca: ca, reg: reg, srv: s, clk: clk}
}

// enroll makes inst a node at ip and returns its certificate.
func (p *portB) enroll(t testing.TB, inst, ip string) (tls.Certificate, wire.Candidate) {
	t.Helper()
	c, tok, err := p.reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: inst, PublicIP: ip})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := p.reg.Claim(inst, ip, tok, secret.NewBytes(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	is := issue(t, p.ca, inst, ip, p.clk.Now(), 0)
	if _, err := p.reg.Complete(cl, registry.Enrolled{Serial: is.Serial, GuestAPIPort: 1}); err != nil {
		t.Fatal(err)
	}
	return keyPair(t, is), c
}

func issue(t testing.TB, ca *pki.CA, inst, ip string, now time.Time, life time.Duration) pki.Issued {
	t.Helper()
	is, err := ca.IssueNode(nil, pki.NodeRequest{InstanceID: inst, PublicIP: netip.MustParseAddr(ip), Now: now, Lifetime: life})
	if err != nil {
		t.Fatal(err)
	}
	return is
}

func keyPair(t testing.TB, is pki.Issued) tls.Certificate {
	kp, err := tls.X509KeyPair(is.CertPEM, is.KeyPEM.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func (p *portB) post(t testing.TB, from string, cert *tls.Certificate, path string, body any) (int, string) {
	t.Helper()
	st, b, err := fakeagent.Post(context.Background(), fakeagent.Client(from, p.ca.Pool(), cert), p.url+path, body)
	if err != nil {
		t.Fatalf("post %s: %v", path, err)
	}
	return st, string(b)
}

func hb(inst string) wire.Heartbeat {
	return wire.Heartbeat{Version: 2, InstanceID: inst, Seq: 1, Ray: wire.RayStatus{State: wire.RayRunning, PID: 9}, HealthToken: "tok.en.sig"}
}

// TestHeartbeatMatrix proves every per-request check of docs/protocol.md §7: only the
// right certificate, from the right address, about itself, of a live node,
// with the recorded serial, gets a 200.
func TestHeartbeatMatrix(t *testing.T) {
	p := newPortB(t)
	c1, _ := p.enroll(t, "i1", "127.0.3.1")
	c2, _ := p.enroll(t, "i2", "127.0.3.2")
	c3, cand3 := p.enroll(t, "i3", "127.0.3.3")
	p.reg.End(cand3.CandidateID, "deleted")

	foreignCA, _, _ := pki.NewCA(nil, "evil", p.clk.Now())
	foreign := keyPair(t, issue(t, foreignCA, "i1", "127.0.3.1", p.clk.Now(), 0))
	expired := keyPair(t, issue(t, p.ca, "i1", "127.0.3.1", p.clk.Now().Add(-48*time.Hour), time.Hour))
	superseded := keyPair(t, issue(t, p.ca, "i1", "127.0.3.1", p.clk.Now(), 0))
	stranger := keyPair(t, issue(t, p.ca, "i9", "127.0.3.9", p.clk.Now(), 0))

	for _, c := range []struct {
		name, from string
		cert       *tls.Certificate
		body       string
		want       int
	}{
		{"good", "127.0.3.1", &c1, "i1", 200},
		{"no cert", "127.0.3.1", nil, "i1", 403},
		{"foreign CA", "127.0.3.1", &foreign, "i1", 403},
		{"expired", "127.0.3.1", &expired, "i1", 403},
		{"cert of another instance", "127.0.3.1", &c2, "i2", 403},
		{"another instance's cert naming us", "127.0.3.1", &c2, "i1", 403},
		{"wrong source ip", "127.0.3.9", &c1, "i1", 403},
		{"body names another instance", "127.0.3.1", &c1, "i2", 403},
		{"ended instance", "127.0.3.3", &c3, "i3", 403},
		{"superseded serial", "127.0.3.1", &superseded, "i1", 403},
		{"never enrolled", "127.0.3.9", &stranger, "i9", 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range []string{"/heartbeat", "/report"} {
				var body any = hb(c.body)
				want := c.want
				if path == "/report" {
					body = wire.Report{Version: 2, InstanceID: c.body, Event: wire.EventStopping}
					if want == 200 {
						want = 204
					}
				}
				st, raw, hdr, err := fakeagent.PostFull(context.Background(), fakeagent.Client(c.from, p.ca.Pool(), c.cert), p.url+path, body)
				if err != nil {
					t.Fatalf("post %s: %v", path, err)
				}
				got := string(raw)
				if st != want {
					t.Errorf("%s: %d %s, want %d", path, st, got, want)
				}
				// Every refusal says docs/protocol.md §7's forbidden; the head's word
				// that it does not know the node (the node ends its rental
				// on it) is a header, only for an instance it has not
				// enrolled or has ended.
				wantUnknown := c.name == "ended instance" || c.name == "never enrolled"
				if want == 403 && got != `{"error":"forbidden"}` {
					t.Errorf("%s: body %s, want forbidden", path, got)
				}
				if unknown := hdr.Get(wire.NodeStatusHeader) == wire.NodeUnknown; want == 403 && unknown != wantUnknown {
					t.Errorf("%s: says unknown node %v, want %v", path, unknown, wantUnknown)
				}
			}
		})
	}
	if tok, ok := p.srv.HealthToken("i1"); !ok || tok.Reveal() != "tok.en.sig" {
		t.Error("health token of the good heartbeat not kept")
	}
	if n, _ := p.reg.Node("i1"); n.Seq != 1 || n.Ray.State != wire.RayRunning || n.LastHeartbeat == nil {
		t.Errorf("heartbeat not recorded: %+v", n)
	}
}

func TestHeartbeatBadBody(t *testing.T) {
	p := newPortB(t)
	c1, _ := p.enroll(t, "i1", "127.0.3.1")
	for _, c := range []struct {
		name string
		body []byte
		want int
	}{
		{"garbage", []byte("{"), 400},
		{"version 2", []byte(`{"version":2,"instance_id":"i1"}`), 400},
		{"unknown field", []byte(`{"version":2,"instance_id":"i1","x":1}`), 400},
		{"oversize", []byte(`{"instance_id":"` + strings.Repeat("a", 70<<10) + `"}`), 413},
	} {
		if st, body := p.post(t, "127.0.3.1", &c1, "/heartbeat", c.body); st != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.want)
		}
	}
	req, _ := http.NewRequest("GET", p.url+"/heartbeat", nil)
	resp, err := fakeagent.Client("127.0.3.1", p.ca.Pool(), &c1).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET /heartbeat: %d, want 405", resp.StatusCode)
	}
}

// TestLostAfterThreeIntervals uses the injected clock: a node silent for 3
// intervals is lost and handed to destroy; its next heartbeat is told to stop.
func TestLostAfterThreeIntervals(t *testing.T) {
	p := newPortB(t)
	c1, cand := p.enroll(t, "i1", "127.0.3.1")
	var destroyed []string
	destroy := func(id, reason string) { destroyed = append(destroyed, id+":"+reason) }
	p.clk.Add(25 * time.Second)
	if st, _ := p.post(t, "127.0.3.1", &c1, "/heartbeat", hb("i1")); st != 200 {
		t.Fatal(st)
	}
	p.clk.Add(29 * time.Second)
	p.srv.SweepLost(destroy)
	if len(destroyed) != 0 {
		t.Fatalf("lost after 2.9 silent intervals: %v", destroyed)
	}
	p.clk.Add(time.Second)
	p.srv.SweepLost(destroy)
	if len(destroyed) != 1 || destroyed[0] != cand.CandidateID+":lost" {
		t.Fatalf("destroyed = %v, want the lost node", destroyed)
	}
	if n, _ := p.reg.Node("i1"); n.State != wire.StateLost {
		t.Errorf("node state %s", n.State)
	}
	st, body := p.post(t, "127.0.3.1", &c1, "/heartbeat", hb("i1"))
	if st != 200 || !strings.Contains(body, `"action":"stop"`) {
		t.Errorf("lost node's heartbeat: %d %s, want action stop", st, body)
	}
}

type fakeChecker struct {
	mu   sync.Mutex
	fail bool
	got  []string
}

func (f *fakeChecker) Check(ctx context.Context, ip string, port int, token string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, token)
	if f.fail {
		return context.DeadlineExceeded
	}
	return nil
}

func TestHealthPolls(t *testing.T) {
	p := newPortB(t)
	c1, _ := p.enroll(t, "i1", "127.0.3.1")
	p.post(t, "127.0.3.1", &c1, "/heartbeat", hb("i1"))
	fc := &fakeChecker{fail: true}
	for range 3 {
		p.srv.PollOnce(context.Background(), fc, 3)
	}
	if n, _ := p.reg.Node("i1"); n.Health != wire.HealthUnhealthy || n.HealthFailures != 3 {
		t.Errorf("after 3 failures: %s %d", n.Health, n.HealthFailures)
	}
	if len(fc.got) != 3 || fc.got[0] != "tok.en.sig" {
		t.Errorf("checker got tokens %v", fc.got)
	}
	fc.fail = false
	p.srv.PollOnce(context.Background(), fc, 3)
	if n, _ := p.reg.Node("i1"); n.Health != wire.HealthHealthy {
		t.Errorf("after a success: %s", n.Health)
	}
}

// TestNoLossAfterStallOrJump: a stall of the head (the monotonic gap between
// sweep ticks) or a wall clock jump gives every node 3 fresh intervals; a
// node silent while the head ticks normally is still lost after 3.
func TestNoLossAfterStallOrJump(t *testing.T) {
	const period = 10 * time.Second / 4 // newPortB: 10 s interval
	for _, c := range []struct {
		name       string
		wall, mono time.Duration
	}{
		{"stall 130s", 130 * time.Second, 130 * time.Second},
		{"clock jump +2h", 2 * time.Hour, period},
		{"clock jump -1h", -time.Hour, period},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPortB(t)
			p.enroll(t, "i1", "127.0.3.1")
			var destroyed []string
			destroy := func(id, reason string) { destroyed = append(destroyed, id) }
			w := NewStallWatch(period)
			mono := time.Duration(0)
			tick := func(wall, m time.Duration) {
				p.clk.Add(wall)
				mono += m
				p.srv.SweepAt(w, p.clk.Now(), mono, destroy)
			}
			tick(0, 0)
			tick(period, period)
			tick(c.wall, c.mono)
			for range 11 { // 2.75 intervals of normal ticks
				tick(period, period)
			}
			if len(destroyed) != 0 {
				t.Fatalf("lost %v within 3 intervals after the %s", destroyed, c.name)
			}
			tick(period, period)
			if len(destroyed) != 1 {
				t.Fatalf("destroyed %v 3 intervals after the %s, want the silent node", destroyed, c.name)
			}
		})
	}
}

func TestStallWatch(t *testing.T) {
	w := NewStallWatch(time.Second)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		wall, mono time.Duration
		want       bool
	}{
		{0, 0, true}, // start
		{time.Second, time.Second, false},
		{2 * time.Second, 2 * time.Second, false},          // a late tick, within 2 periods
		{7 * time.Second, 7 * time.Second, true},           // stall
		{8 * time.Second, 8 * time.Second, false},          //
		{time.Hour, 9 * time.Second, true},                 // wall jump
		{time.Hour + time.Second, 10 * time.Second, false}, //
		{time.Hour - time.Minute, 11 * time.Second, true},  // wall back
		{time.Hour - time.Minute + 1e9, 12 * time.Second, false},
	} {
		if got := w.Tick(t0.Add(c.wall), c.mono); got != c.want {
			t.Errorf("tick %d (wall %v mono %v): deaf %v, want %v", i, c.wall, c.mono, got, c.want)
		}
	}
}

// TestCrashloopEndsAtOnce proves a ray_crashloop report hands the node to
// Destroy at once (no 3 intervals), while ray_exited and ray_restarted
// reports do not; the node's next heartbeat is refused once it ended.
func TestCrashloopEndsAtOnce(t *testing.T) {
	p := newPortB(t)
	var mu sync.Mutex
	var destroyed []string
	p.srv.cfg.Destroy = func(id, reason string) {
		mu.Lock()
		destroyed = append(destroyed, id+":"+reason)
		mu.Unlock()
		p.reg.End(id, reason)
	}
	c1, cand := p.enroll(t, "i1", "127.0.3.1")
	for _, ev := range []string{wire.EventRayExited, wire.EventRayRestarted, wire.EventStopping} {
		if st, body := p.post(t, "127.0.3.1", &c1, "/report", wire.Report{Version: 2, InstanceID: "i1", Event: ev}); st != 204 {
			t.Fatalf("%s: %d %s", ev, st, body)
		}
	}
	if len(destroyed) != 0 {
		t.Fatalf("destroyed after exit/restart reports: %v", destroyed)
	}
	if st, body := p.post(t, "127.0.3.1", &c1, "/report", wire.Report{Version: 2, InstanceID: "i1", Event: wire.EventRayCrashloop, Detail: "exit code 3 after 5 restarts"}); st != 204 {
		t.Fatalf("crashloop: %d %s", st, body)
	}
	if want := cand.CandidateID + ":" + ReasonCrashloop; len(destroyed) != 1 || destroyed[0] != want {
		t.Fatalf("destroyed = %v, want [%s]", destroyed, want)
	}
	if st, _ := p.post(t, "127.0.3.1", &c1, "/heartbeat", hb("i1")); st != 403 {
		t.Errorf("heartbeat after the crash loop ended the node: %d, want 403", st)
	}
}

// TestRayReportKept proves the head keeps a node's last Ray report for
// `head node` and the admin API: ray_not_joined with Ray's last words, its
// detail cut to wire.RayReportDetailMax bytes, a later report replacing it.
func TestRayReportKept(t *testing.T) {
	p := newPortB(t)
	c1, _ := p.enroll(t, "i1", "127.0.3.1")
	if n, _ := p.reg.Node("i1"); n.RayReport != nil {
		t.Fatalf("a new node has a Ray report: %+v", n.RayReport)
	}
	words := "not joined after 2m0s; Ray's last words: " + strings.Repeat("x", 2*wire.RayReportDetailMax)
	if st, body := p.post(t, "127.0.3.1", &c1, "/report", wire.Report{Version: 2, InstanceID: "i1", Event: wire.EventRayNotJoined, Detail: words}); st != 204 {
		t.Fatalf("report: %d %s", st, body)
	}
	n, _ := p.reg.Node("i1")
	if r := n.RayReport; r == nil || r.Event != wire.EventRayNotJoined || r.Detail != words[:wire.RayReportDetailMax] || r.At.IsZero() {
		t.Fatalf("kept report = %+v, want ray_not_joined with its detail cut to %d bytes", r, wire.RayReportDetailMax)
	}
	if st, body := p.post(t, "127.0.3.1", &c1, "/report", wire.Report{Version: 2, InstanceID: "i1", Event: wire.EventRayRestarted}); st != 204 {
		t.Fatalf("report: %d %s", st, body)
	}
	if n, _ := p.reg.Node("i1"); n.RayReport == nil || n.RayReport.Event != wire.EventRayRestarted || n.RayReport.Detail != "" {
		t.Fatalf("after a later report: %+v, want ray_restarted", n.RayReport)
	}
}

// TestReplyNamesRunningRayHead proves heartbeat answers name the Ray head
// that runs now, by its ID, and name none while it is down or starting:
// a node restarts its Ray when the ID changes, and must not restart it
// toward a Ray head that is not up yet.
func TestReplyNamesRunningRayHead(t *testing.T) {
	var mu sync.Mutex
	id, up := "", false
	p := newPortB(t, func(c *Config) {
		c.RayHead = func() (string, bool) { mu.Lock(); defer mu.Unlock(); return id, up }
	})
	c1, _ := p.enroll(t, "i1", "127.0.4.1")
	for _, c := range []struct {
		id   string
		up   bool
		want string
	}{
		{"aaaa", false, `{"interval_s":10,"action":"none"}`},
		{"aaaa", true, `{"interval_s":10,"action":"none","ray_head":{"id":"aaaa"}}`},
		{"bbbb", false, `{"interval_s":10,"action":"none"}`},
		{"bbbb", true, `{"interval_s":10,"action":"none","ray_head":{"id":"bbbb"}}`},
	} {
		mu.Lock()
		id, up = c.id, c.up
		mu.Unlock()
		st, got := p.post(t, "127.0.4.1", &c1, "/heartbeat", hb("i1"))
		got = withoutMesh(t, got) // mesh.go's tests judge the membership
		if st != 200 || strings.TrimSpace(got) != c.want {
			t.Errorf("Ray head %s up %v: %d %s, want %s", c.id, c.up, st, got, c.want)
		}
	}
}

// TestReplyCarriesDrain proves a node's heartbeat answers carry the drain
// notice, with the deadline, while the head drains that node (the loop's
// reconcile.Drains), and only that node's: another node's answer and the
// answers before and after the drain have none.
func TestReplyCarriesDrain(t *testing.T) {
	var mu sync.Mutex
	draining := false
	deadline := time.Date(2026, 12, 7, 15, 2, 0, 0, time.UTC)
	p := newPortB(t, func(c *Config) {
		c.Drain = func(id string) (time.Time, bool) {
			mu.Lock()
			defer mu.Unlock()
			return deadline, draining && id == "i1"
		}
	})
	c1, _ := p.enroll(t, "i1", "127.0.5.1")
	c2, _ := p.enroll(t, "i2", "127.0.5.2")
	for _, c := range []struct {
		on       bool
		ip, inst string
		cert     *tls.Certificate
		want     string
	}{
		{false, "127.0.5.1", "i1", &c1, `{"interval_s":10,"action":"none"}`},
		{true, "127.0.5.1", "i1", &c1, `{"interval_s":10,"action":"none","drain":{"deadline":"2026-12-07T15:02:00Z"}}`},
		{true, "127.0.5.2", "i2", &c2, `{"interval_s":10,"action":"none"}`},
		{false, "127.0.5.1", "i1", &c1, `{"interval_s":10,"action":"none"}`},
	} {
		mu.Lock()
		draining = c.on
		mu.Unlock()
		st, got := p.post(t, c.ip, c.cert, "/heartbeat", hb(c.inst))
		got = withoutMesh(t, got)
		if st != 200 || strings.TrimSpace(got) != c.want {
			t.Errorf("draining i1 %v, %s's answer: %d %s, want %s", c.on, c.inst, st, got, c.want)
		}
	}
}
