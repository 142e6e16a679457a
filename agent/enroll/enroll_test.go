package enroll

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/internal/wire"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	sum  string
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	sum := sha256.Sum256(der)
	return &testCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), hex.EncodeToString(sum[:])}
}

func (ca *testCA) leaf(t *testing.T, ip string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP(ip)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// headServer is a TLS server on loopback with a certificate from ca.
func headServer(t *testing.T, ca *testCA, h http.Handler) (*httptest.Server, netip.AddrPort) {
	t.Helper()
	s := httptest.NewUnstartedServer(h)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, "127.0.0.1")}}
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // rejected handshakes are the point of some tests
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, netip.MustParseAddrPort(s.Listener.Addr().String())
}

func TestFetchCA(t *testing.T) {
	ca := newCA(t)
	other := newCA(t)
	for _, c := range []struct {
		name    string
		body    []byte
		want    string
		wantErr string
	}{
		{"good", ca.pem, ca.sum, ""},
		{"wrong fingerprint", other.pem, ca.sum, "does not match"},
		{"two certificates", append(append([]byte{}, ca.pem...), other.pem...), ca.sum, "more than one"},
		{"not PEM", []byte("hello"), ca.sum, "no PEM certificate"},
		{"a key, not a cert", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), ca.sum, "no PEM certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, addr := headServer(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/ca.pem" {
					http.NotFound(w, r)
					return
				}
				w.Write(c.body)
			}))
			got, err := FetchCA(context.Background(), addr, c.want)
			if c.wantErr == "" {
				if err != nil || !got.Equal(ca.cert) {
					t.Fatalf("FetchCA = %v, %v; want the CA", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("FetchCA err = %v, want %q", err, c.wantErr)
			}
		})
	}
}

// TestTLSConfigPinsOnlyTheCA proves that after pinning, a head whose
// certificate comes from another CA (or names another IP) is rejected.
func TestTLSConfigPinsOnlyTheCA(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	_, good := headServer(t, ca, ok)
	_, bad := headServer(t, other, ok)
	hc := HTTPClient(TLSConfig(ca.cert, netip.MustParseAddr("127.0.0.1"), nil), 5*time.Second)
	if resp, err := hc.Get("https://" + good.String() + "/"); err != nil {
		t.Fatalf("head with the pinned CA refused: %v", err)
	} else {
		resp.Body.Close()
	}
	if _, err := hc.Get("https://" + bad.String() + "/"); err == nil {
		t.Fatal("head with another CA accepted")
	}
	wrongIP := HTTPClient(TLSConfig(ca.cert, netip.MustParseAddr("127.0.0.2"), nil), 5*time.Second)
	if _, err := wrongIP.Get("https://" + good.String() + "/"); err == nil {
		t.Fatal("certificate for 127.0.0.1 accepted as 127.0.0.2")
	}
}

func okBundle() wire.EnrollResponse {
	return wire.EnrollResponse{Version: 2, NodeCert: "C", NodeKey: "K", CACert: "A", ClusterToken: "T", AppID: "app",
		Ray: wire.RayParams{HeadAddress: "127.0.0.1:6379"}, Heartbeat: wire.HeartbeatParams{Port: 1, IntervalS: 30}}
}

// TestEnrollRetries proves which answers are retried (network errors,
// 5xx, 429) and which end enrollment at once (403 and other 4xx).
// cutAnswer stands for a 200 whose body ends early.
const cutAnswer = -1

func TestEnrollRetries(t *testing.T) {
	ca := newCA(t)
	for _, c := range []struct {
		name      string
		statuses  []int // answers in order; after them, 200
		wantCalls int32
		wantErr   string
	}{
		{"200 at once", nil, 1, ""},
		{"503 then 200", []int{503}, 2, ""},
		{"429, 500, 502 then 200", []int{429, 500, 502}, 4, ""},
		{"403 refused is final", []int{403}, 1, "403 refused"},
		{"403 after a 503 is final", []int{503, 403, 503}, 2, "403 refused"},
		{"400 is final", []int{400}, 1, "status 400"},
		{"200 cut short (head killed mid-answer) then 200", []int{cutAnswer}, 2, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			_, addr := headServer(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req wire.EnrollRequest
				if err := wire.Decode(r.Body, wire.MaxBody, &req); err != nil || r.Method != http.MethodPost {
					t.Errorf("bad request: %v", err)
				}
				if req.JoinToken != "tok" || req.PortKey != "key" {
					t.Errorf("a retry changed the token or port_key: %q %q", req.JoinToken, req.PortKey)
				}
				n := int(calls.Add(1)) - 1
				if n < len(c.statuses) && c.statuses[n] == cutAnswer {
					w.Header().Set("Content-Length", "4096")
					w.WriteHeader(200)
					w.Write([]byte(`{"version":2,"node_cert":"-----BEGIN`))
					return
				}
				if n < len(c.statuses) {
					w.WriteHeader(c.statuses[n])
					if c.statuses[n] == 403 {
						w.Write([]byte(`{"error":"refused"}`))
					}
					return
				}
				json.NewEncoder(w).Encode(okBundle())
			}))
			var slept []time.Duration
			cfg := backoff.RetryConfig{Sleep: func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return nil }}
			hc := HTTPClient(TLSConfig(ca.cert, addr.Addr(), nil), 5*time.Second)
			url := "https://" + addr.String() + "/enroll"
			got, err := backoff.Retry(context.Background(), cfg, "enroll", func(ctx context.Context) (wire.EnrollResponse, error) {
				return Enroll(ctx, hc, url, wire.EnrollRequest{Version: 2, InstanceID: "i", JoinToken: "tok", PortKey: "key"})
			})
			if calls.Load() != c.wantCalls {
				t.Errorf("calls = %d, want %d", calls.Load(), c.wantCalls)
			}
			if len(slept) != int(c.wantCalls)-1 {
				t.Errorf("slept %d times, want %d", len(slept), c.wantCalls-1)
			}
			if c.wantErr == "" {
				if err != nil || got.AppID != "app" {
					t.Fatalf("Enroll = %v, %v", got, err)
				}
				return
			}
			var r *Refusal
			if !errors.As(err, &r) || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want a *Refusal with %q", err, c.wantErr)
			}
		})
	}
}

func TestEnrollRejectedReason(t *testing.T) {
	ca := newCA(t)
	_, addr := headServer(t, ca, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(403)
		w.Write([]byte(`{"error":"rejected","reason":"port_check"}`))
	}))
	hc := HTTPClient(TLSConfig(ca.cert, addr.Addr(), nil), 5*time.Second)
	_, err := Enroll(context.Background(), hc, "https://"+addr.String()+"/enroll", wire.EnrollRequest{})
	var r *Refusal
	if !errors.As(err, &r) || r.Body.Reason != wire.ReasonPortCheck {
		t.Fatalf("err = %v, want rejected/port_check", err)
	}
}

// TestRetryNetworkErrorAndGiveUp proves a head that is not there is
// retried with growing delays until MaxElapsed, then given up.
func TestRetryNetworkErrorAndGiveUp(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	url := "https://" + l.Addr().String() + "/enroll"
	l.Close() // nothing listens: connection refused
	now := time.Unix(0, 0)
	var slept []time.Duration
	cfg := backoff.RetryConfig{
		Now: func() time.Time { return now },
		Sleep: func(ctx context.Context, d time.Duration) error {
			slept = append(slept, d)
			now = now.Add(d)
			return nil
		},
		MaxElapsed: 2 * time.Minute,
	}
	cfg.Policy.Rand = func() float64 { return 0.5 }
	hc := HTTPClient(&tls.Config{}, time.Second)
	_, err := backoff.Retry(context.Background(), cfg, "enroll", func(ctx context.Context) (wire.EnrollResponse, error) {
		return Enroll(ctx, hc, url, wire.EnrollRequest{})
	})
	if err == nil || !strings.Contains(err.Error(), "giving up") {
		t.Fatalf("err = %v, want giving up", err)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32} // 63 s slept; the next 60 s would pass 2 min
	if len(slept) != len(want) {
		t.Fatalf("slept %v, want %v s", slept, want)
	}
	for i := range want {
		if slept[i] != want[i]*time.Second {
			t.Errorf("sleep %d = %v, want %vs", i, slept[i], want[i])
		}
	}
}
