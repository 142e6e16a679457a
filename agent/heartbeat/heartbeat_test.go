package heartbeat

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/bundle"
	"github.com/rayvast/rayvast/agent/enroll"
	"github.com/rayvast/rayvast/agent/internal/enrolltest"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// fakePortB is a mutual-TLS server like the head's port B: it requires a
// client certificate from ca and records what it is sent.
type fakePortB struct {
	mu     sync.Mutex
	beats  []wire.Heartbeat
	peers  []string // instance IDs of the client certs
	report []wire.Report
	answer func(seq int64) (int, wire.HeartbeatReply)
	raw    func(seq int64) string // when set, the 200 body itself (a later head's fields)
}

func (f *fakePortB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, _ := pki.InstanceID(r.TLS.PeerCertificates[0])
	f.peers = append(f.peers, id)
	switch r.URL.Path {
	case "/heartbeat":
		var hb wire.Heartbeat
		if err := wire.Decode(r.Body, wire.MaxBody, &hb); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f.beats = append(f.beats, hb)
		if f.raw != nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(f.raw(hb.Seq)))
			return
		}
		code, reply := f.answer(hb.Seq)
		w.WriteHeader(code)
		if code == 200 {
			writeJSON(w, reply)
		}
	case "/report":
		var rep wire.Report
		if err := wire.Decode(r.Body, wire.MaxBody, &rep); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		f.report = append(f.report, rep)
		w.WriteHeader(204)
	}
}

// setup returns a client holding a real node cert and a port B server.
func setup(t *testing.T, f *fakePortB) (*http.Client, string) {
	t.Helper()
	ca := enrolltest.CA(t)
	ports := enrolltest.Ports(40000)
	b, err := bundle.Parse(enrolltest.Response(t, ca, "inst-1", "127.0.0.1", ports), ca.Cert, "inst-1", ports)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer(nil, netip.MustParseAddr("127.0.0.1"), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(server.CertPEM, server.KeyPEM.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(f)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	s.StartTLS()
	t.Cleanup(s.Close)
	hc := enroll.HTTPClient(enroll.TLSConfig(ca.Cert, netip.MustParseAddr("127.0.0.1"), &b.NodeCert), 5*time.Second)
	return hc, "https://" + s.Listener.Addr().String()
}

// TestRun proves: seq grows from 1, Ray's status and the health token are
// sent with the node cert, the head's interval is adopted, waits are
// jittered within ±10%, and "stop" calls OnStop exactly once.
func TestRun(t *testing.T) {
	f := &fakePortB{answer: func(seq int64) (int, wire.HeartbeatReply) {
		if seq >= 3 {
			return 200, wire.HeartbeatReply{IntervalS: 5, Action: wire.ActionStop}
		}
		return 200, wire.HeartbeatReply{IntervalS: 5, Action: wire.ActionNone}
	}}
	hc, url := setup(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	stops := 0
	rnd := []float64{0, 0.999, 0.5}
	err := Run(ctx, Config{
		Client: hc, BaseURL: url, InstanceID: "inst-1", Interval: 30 * time.Second,
		Status:      func() wire.RayStatus { return wire.RayStatus{State: wire.RayRunning, PID: 42} },
		HealthToken: func(time.Time) string { return "h.t.s" },
		OnStop:      func() { stops++ },
		Rand:        func() float64 { r := rnd[len(waits)%3]; return r },
		Sleep: func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			if len(waits) == 5 {
				cancel()
				return ctx.Err()
			}
			return nil
		},
	})
	if err != context.Canceled {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if len(f.beats) != 5 {
		t.Fatalf("head got %d beats, want 5", len(f.beats))
	}
	for i, hb := range f.beats {
		if hb.Seq != int64(i+1) || hb.InstanceID != "inst-1" || hb.Ray.State != wire.RayRunning || hb.Ray.PID != 42 || hb.HealthToken != "h.t.s" {
			t.Errorf("beat %d = %+v", i, hb)
		}
		if f.peers[i] != "inst-1" {
			t.Errorf("beat %d client cert names %q", i, f.peers[i])
		}
	}
	for i, d := range waits {
		if d < 4500*time.Millisecond || d > 5500*time.Millisecond {
			t.Errorf("wait %d = %v, want 5s ±10%%", i, d)
		}
	}
	if waits[0] == waits[1] {
		t.Errorf("waits not jittered: %v", waits)
	}
	if stops != 1 {
		t.Errorf("OnStop called %d times, want 1", stops)
	}
}

// TestRunHeadUnreachable proves the loop neither exits nor spins while
// the head is away: it backs off up to the interval and recovers.
func TestRunHeadUnreachable(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "https://" + l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	var seqs []int64
	err := Run(ctx, Config{
		Client:  &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}},
		BaseURL: dead, InstanceID: "inst-1", Interval: 10 * time.Second,
		Status: func() wire.RayStatus { return wire.RayStatus{State: wire.RayStarting} },
		Rand:   func() float64 { return 0.5 },
		OnBeat: func(hb wire.Heartbeat, err error) {
			if err == nil {
				t.Error("a beat to a dead head succeeded")
			}
			seqs = append(seqs, hb.Seq)
		},
		Sleep: func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			if len(waits) == 6 {
				cancel()
				return ctx.Err()
			}
			return nil
		},
	})
	if err != context.Canceled {
		t.Fatalf("Run = %v, want it to keep trying until cancelled", err)
	}
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Errorf("wait %d = %v, want %vs (waits %v)", i, waits[i], want[i], waits)
		}
	}
	if len(seqs) != 6 || seqs[5] != 6 {
		t.Errorf("seqs = %v, want 1..6", seqs)
	}
}

func TestReport(t *testing.T) {
	f := &fakePortB{}
	hc, url := setup(t, f)
	err := Report(context.Background(), hc, url, wire.Report{Version: 2, InstanceID: "inst-1", Event: wire.EventRayExited, Detail: "exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.report) != 1 || f.report[0].Event != wire.EventRayExited {
		t.Errorf("reports = %+v", f.report)
	}
}

// TestRunFinal proves closing Final sends one more heartbeat at once (with
// Ray's final status) and ends Run without waiting out the interval.
func TestRunFinal(t *testing.T) {
	f := &fakePortB{answer: func(int64) (int, wire.HeartbeatReply) {
		return 200, wire.HeartbeatReply{IntervalS: 3600, Action: wire.ActionNone}
	}}
	hc, url := setup(t, f)
	final := make(chan struct{})
	code := 7
	var state = wire.RayStatus{State: wire.RayRunning, PID: 9}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Config{Client: hc, BaseURL: url, InstanceID: "inst-1", Interval: time.Hour,
			Status: func() wire.RayStatus { return state },
			OnBeat: func(hb wire.Heartbeat, err error) {
				if hb.Seq == 1 {
					state = wire.RayStatus{State: wire.RayExited, PID: 9, ExitCode: &code}
					close(final)
				}
			},
			Final: final})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after Final", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Final closed")
	}
	if len(f.beats) != 2 || f.beats[1].Ray.State != wire.RayExited || *f.beats[1].Ray.ExitCode != 7 {
		t.Fatalf("beats = %+v, want a last one with exit code 7", f.beats)
	}
}

// TestRunIntervalBounded proves a head's interval_s cannot make the loop
// spin (0, negative, or so large that seconds overflow a Duration into a
// negative wait) or stall for years (10^9 s): every wait stays within
// [MinInterval, MaxInterval] ±10%, on success and on failure.
func TestRunIntervalBounded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		config   time.Duration
		interval int
	}{
		{"zero", 30 * time.Second, 0},
		{"negative", 30 * time.Second, -5},
		{"half a second from config", 500 * time.Millisecond, 0},
		{"a billion seconds", 30 * time.Second, 1_000_000_000},
		{"overflows a Duration", 30 * time.Second, 10_000_000_000},
		{"max int", 30 * time.Second, int(^uint(0) >> 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakePortB{answer: func(seq int64) (int, wire.HeartbeatReply) {
				if seq >= 3 {
					return 503, wire.HeartbeatReply{}
				}
				return 200, wire.HeartbeatReply{IntervalS: tc.interval, Action: wire.ActionNone}
			}}
			hc, url := setup(t, f)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var waits []time.Duration
			Run(ctx, Config{Client: hc, BaseURL: url, InstanceID: "inst-1", Interval: tc.config,
				Status: func() wire.RayStatus { return wire.RayStatus{State: wire.RayRunning} },
				Sleep: func(ctx context.Context, d time.Duration) error {
					waits = append(waits, d)
					if len(waits) == 8 {
						cancel()
						return ctx.Err()
					}
					return nil
				}})
			for i, d := range waits {
				if d < MinInterval*9/10 || d > MaxInterval*11/10 {
					t.Errorf("wait %d = %v, want within [%v, %v] ±10%% (waits %v)", i, d, MinInterval, MaxInterval, waits)
				}
			}
		})
	}
}

// TestRunTellsRayHead proves each answer's Ray head reaches OnRayHead, ""
// when the answer names none (the head runs no Ray head, or it is down),
// and that OnRayHead asking for soon makes the next wait about a second.
func TestRunTellsRayHead(t *testing.T) {
	names := map[int64]*wire.RayHeadRun{2: {ID: "aaaa"}, 3: {ID: "bbbb"}}
	f := &fakePortB{answer: func(seq int64) (int, wire.HeartbeatReply) {
		return 200, wire.HeartbeatReply{IntervalS: 5, Action: wire.ActionNone, RayHead: names[seq]}
	}}
	hc, url := setup(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	var waits []time.Duration
	beats := 0
	_ = Run(ctx, Config{
		Client: hc, BaseURL: url, InstanceID: "inst-1", Interval: 5 * time.Second,
		Status:    func() wire.RayStatus { return wire.RayStatus{State: wire.RayRunning} },
		OnRayHead: func(id string) bool { got = append(got, id); return id == "bbbb" },
		Sleep: func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			if beats++; beats == 4 {
				cancel()
				return ctx.Err()
			}
			return nil
		},
	})
	if want := []string{"", "aaaa", "bbbb", ""}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("OnRayHead got %q, want %q", got, want)
	}
	for i, w := range waits {
		soon := i == 2
		if soon != (w <= 1100*time.Millisecond) || w < 900*time.Millisecond {
			t.Errorf("wait %d = %v (soon asked: %v), want 1 s ±10%% when asked, else 5 s ±10%%", i, w, soon)
		}
	}
}

// TestRunTellsDrain proves each answer's drain notice reaches OnDrain (nil
// when the answer names none), read from a reply that also carries a
// field this agent does not know (a later head's): the beat counts as
// answered, not failed.
func TestRunTellsDrain(t *testing.T) {
	bodies := map[int64]string{
		1: `{"interval_s":5,"action":"none","from_a_later_head":true}`,
		2: `{"interval_s":5,"action":"none","drain":{"deadline":"2026-12-07T15:02:00Z"},"from_a_later_head":[1]}`,
		3: `{"interval_s":5,"action":"none"}`,
	}
	f := &fakePortB{raw: func(seq int64) string { return bodies[seq] }}
	hc, url := setup(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	var errs []error
	beats := 0
	_ = Run(ctx, Config{
		Client: hc, BaseURL: url, InstanceID: "inst-1", Interval: 5 * time.Second,
		Status: func() wire.RayStatus { return wire.RayStatus{State: wire.RayRunning} },
		OnDrain: func(d *wire.DrainNotice) {
			if d == nil {
				got = append(got, "-")
			} else {
				got = append(got, d.Deadline.UTC().Format(time.TimeOnly))
			}
		},
		OnBeat: func(_ wire.Heartbeat, err error) { errs = append(errs, err) },
		Sleep: func(ctx context.Context, d time.Duration) error {
			if beats++; beats == 3 {
				cancel()
				return ctx.Err()
			}
			return nil
		},
	})
	if want := "-,15:02:00,-"; strings.Join(got, ",") != want {
		t.Errorf("OnDrain got %q, want %q", strings.Join(got, ","), want)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("beat %d failed: %v (an unknown field must be skipped)", i+1, err)
		}
	}
}
