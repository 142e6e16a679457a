package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/rayvast/rayvast/internal/pki"
)

// The stranger of issue 21: an address of its own on the internet of the
// local vast network. It lives in a network namespace the test makes,
// joined to this machine by a veth pair, with routes only to the nodes'
// public IPs and the head's IP (nothing else, so its TEST-NET address
// never leaves the namespace's reach). This machine routes its address back
// over the veth and forwards its connections like any from the internet:
// to a public IP:port through vast's NAT (the docker provider's DNAT), to
// the head's IP to whatever listens there. Docker's FORWARD chain drops
// what enters its bridges from elsewhere, so one DOCKER-USER rule accepts
// what comes in on this veth (removed at the end).

// strangerIP is the stranger's address (TEST-NET-2).
const strangerIP = "198.51.100.7"

type stranger struct {
	ns         netns.NsHandle
	name, veth string
}

func newStranger(t *testing.T, targets ...string) *stranger {
	t.Helper()
	id := strconv.Itoa(os.Getpid() % 100000)
	s := &stranger{name: "rvstranger-" + id, veth: "rvsh" + id}
	peer := "rvsn" + id
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("stranger: %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	sh("ip", "netns", "add", s.name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", s.name).Run() })
	sh("ip", "link", "add", s.veth, "type", "veth", "peer", "name", peer, "netns", s.name)
	t.Cleanup(func() { exec.Command("ip", "link", "del", s.veth).Run() })
	sh("ip", "-n", s.name, "addr", "add", strangerIP+"/32", "dev", peer)
	sh("ip", "-n", s.name, "link", "set", "lo", "up")
	sh("ip", "-n", s.name, "link", "set", peer, "up")
	sh("ip", "link", "set", s.veth, "up")
	// No address on this machine's end: it answers ARP for what it routes.
	sh("sysctl", "-qw", "net.ipv4.conf."+s.veth+".proxy_arp=1")
	// replace, not add: a run killed before its cleanup leaves its route.
	sh("ip", "route", "replace", strangerIP+"/32", "dev", s.veth)
	for _, ip := range targets {
		sh("ip", "-n", s.name, "route", "add", ip+"/32", "dev", peer)
	}
	sh("iptables", "-I", "DOCKER-USER", "-i", s.veth, "-j", "ACCEPT")
	t.Cleanup(func() { exec.Command("iptables", "-D", "DOCKER-USER", "-i", s.veth, "-j", "ACCEPT").Run() })
	h, err := netns.GetFromName(s.name)
	if err != nil {
		t.Fatal(err)
	}
	s.ns = h
	t.Cleanup(func() { h.Close() })
	return s
}

// dial connects from the stranger's namespace.
func (s *stranger) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return nsDial(s.ns)(ctx, network, addr)
}

// nsDial connects from network namespace ns: the socket is made on a
// thread switched into it (and never switched back: the thread ends with
// its goroutine).
func nsDial(ns netns.NsHandle) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			runtime.LockOSThread()
			if err := netns.Set(ns); err != nil {
				ch <- res{nil, err}
				return
			}
			d := net.Dialer{Timeout: 3 * time.Second}
			c, err := d.DialContext(ctx, network, addr)
			ch <- res{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// python runs the Ray venv's python in the stranger's namespace.
func (s *stranger) python(ctx context.Context, python string, env []string, code string) (string, error) {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", s.name, python, "-c", code)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

var hostDial dialFunc = (&net.Dialer{Timeout: 3 * time.Second}).DialContext

// creds are what a caller presents: a client certificate (nil: none) and
// the cluster token (empty: none).
type creds struct {
	name  string
	cert  *tls.Certificate
	token string
}

// foreignPEMs are a CA of the stranger's own and a certificate it issued
// for ip, as pki makes the cluster's: what a stranger could make.
func foreignPEMs(t *testing.T, ip string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	ca, _, err := pki.NewCA(rand.Reader, "stranger", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	iss, err := ca.IssueRayHead(rand.Reader, netip.MustParseAddr(ip), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM, iss.CertPEM, iss.KeyPEM.Reveal()
}

// foreignCert is foreignPEMs' certificate and key.
func foreignCert(t *testing.T, ip string) *tls.Certificate {
	t.Helper()
	_, certPEM, keyPEM := foreignPEMs(t, ip)
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// answer is what one request got: no HTTP answer (err), or a status and,
// for gRPC, its grpc-status.
type answer struct {
	what       string // "GET /metrics (plain)"
	err        error
	status     int
	grpcStatus string
	body       string // its first bytes
}

func (a answer) String() string {
	if a.err != nil {
		return fmt.Sprintf("%s: no answer (%s)", a.what, shortErr(a.err))
	}
	s := fmt.Sprintf("%s: %d", a.what, a.status)
	if a.grpcStatus != "" {
		s += " grpc-status " + a.grpcStatus
	}
	return s
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s) > 80 {
		s = s[i+2:]
	}
	return s
}

// client is an HTTP client dialing with dial: plain HTTP/1.1 and h2c
// (plaintext gRPC), or TLS (HTTP/2 when the server offers it) presenting
// c's certificate.
func client(dial dialFunc, tlsOn bool, c creds) *http.Client {
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true, ResponseHeaderTimeout: 4 * time.Second}
	if tlsOn {
		cfg := &tls.Config{InsecureSkipVerify: true} // the probe judges what answers, not who
		if c.cert != nil {
			cert := *c.cert
			cfg.Certificates = []tls.Certificate{cert}
		}
		tr.TLSClientConfig = cfg
		tr.ForceAttemptHTTP2 = true
	} else {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP1(true)
	}
	return &http.Client{Transport: tr, Timeout: 6 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// h2cClient speaks HTTP/2 without TLS (gRPC without TLS).
func h2cClient(dial dialFunc) *http.Client {
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true, ResponseHeaderTimeout: 4 * time.Second}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr, Timeout: 6 * time.Second}
}

// httpCall is one HTTP request of the battery.
type httpCall struct {
	method, path, body string
	contentType        string
}

// rayHTTPCalls are what Ray's HTTP doors accept: Prometheus metrics, the
// dashboard's job API, the dashboard agent's job API (which starts the
// job's driver on that node), the runtime-env agent (which installs
// packages).
var rayHTTPCalls = []httpCall{
	{method: "GET", path: "/metrics"},
	{method: "GET", path: "/api/version"},
	{method: "GET", path: "/api/jobs/"},
	{method: "POST", path: "/api/jobs/", body: `{"entrypoint":"echo rayvast-stranger"}`, contentType: "application/json"},
	{method: "POST", path: "/api/job_agent/jobs/", body: `{"submission_id":"rayvast-stranger","entrypoint":"echo rayvast-stranger"}`, contentType: "application/json"},
	{method: "POST", path: "/get_or_create_runtime_env", body: "", contentType: "application/octet-stream"},
}

// grpcMethods are gRPC calls of Ray's GCS, raylet and agents (an empty
// request message each): any answer proves the caller got past TLS.
var grpcMethods = []string{
	"/ray.rpc.NodeInfoGcsService/GetAllNodeInfo",
	"/ray.rpc.NodeManagerService/GetNodeStats",
	"/ray.rpc.ReporterService/HealthCheck",
}

func (h httpCall) do(ctx context.Context, cl *http.Client, scheme, addr, token, label string) answer {
	a := answer{what: fmt.Sprintf("%s %s (%s)", h.method, h.path, label)}
	req, err := http.NewRequestWithContext(ctx, h.method, scheme+"://"+addr+h.path, strings.NewReader(h.body))
	if err != nil {
		a.err = err
		return a
	}
	if h.contentType != "" {
		req.Header.Set("Content-Type", h.contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cl.Do(req)
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	a.status, a.body = resp.StatusCode, string(b)
	return a
}

// grpcCall posts an empty message to method: HTTP/2, application/grpc.
func grpcCall(ctx context.Context, cl *http.Client, scheme, addr, method, token, label string) answer {
	a := answer{what: fmt.Sprintf("gRPC %s (%s)", method, label)}
	req, err := http.NewRequestWithContext(ctx, "POST", scheme+"://"+addr+method, bytes.NewReader([]byte{0, 0, 0, 0, 0}))
	if err != nil {
		a.err = err
		return a
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cl.Do(req)
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	a.status = resp.StatusCode
	a.grpcStatus = resp.Header.Get("Grpc-Status")
	if a.grpcStatus == "" {
		a.grpcStatus = resp.Trailer.Get("Grpc-Status")
	}
	if a.grpcStatus == "" && resp.ProtoMajor != 2 {
		a.grpcStatus = "" // an HTTP/1 server: not gRPC
	}
	return a
}

// portReport is what one port did for one caller.
type portReport struct {
	target    string // ip:port
	role      string
	connected bool
	connErr   error
	answers   []answer
}

// probePort connects, then (if it connected) tries the whole battery:
// plain HTTP, plaintext gRPC, and over TLS, for each of cs, HTTPS and gRPC.
func probePort(ctx context.Context, dial dialFunc, target, role string, cs []creds, calls []httpCall) portReport {
	r := portReport{target: target, role: role}
	c, err := dial(ctx, "tcp", target)
	if err != nil {
		r.connErr = err
		return r
	}
	c.Close()
	r.connected = true
	plain := client(dial, false, creds{})
	for _, h := range calls {
		r.answers = append(r.answers, h.do(ctx, plain, "http", target, "", "plain"))
	}
	h2c := h2cClient(dial)
	r.answers = append(r.answers, grpcCall(ctx, h2c, "http", target, grpcMethods[0], "", "plaintext"))
	for _, cr := range cs {
		cl := client(dial, true, cr)
		for _, h := range calls {
			r.answers = append(r.answers, h.do(ctx, cl, "https", target, cr.token, "TLS, "+cr.name))
		}
		for _, m := range grpcMethods {
			r.answers = append(r.answers, grpcCall(ctx, cl, "https", target, m, cr.token, "TLS, "+cr.name))
		}
	}
	return r
}

// probeAll runs probePort on every target, a few at a time.
func probeAll(ctx context.Context, dial dialFunc, targets []target, cs []creds) []portReport {
	out := make([]portReport, len(targets))
	sem := make(chan struct{}, 24)
	var wg sync.WaitGroup
	for i, tg := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			calls := rayHTTPCalls
			if tg.guest {
				calls = guestCalls
			}
			if tg.connectOnly {
				out[i] = portReport{target: tg.addr, role: tg.role}
				if c, err := dial(ctx, "tcp", tg.addr); err != nil {
					out[i].connErr = err
				} else {
					c.Close()
					out[i].connected = true
				}
				return
			}
			out[i] = probePort(ctx, dial, tg.addr, tg.role, cs, calls)
		}()
	}
	wg.Wait()
	return out
}

// target is one port to probe and what it is.
type target struct {
	addr, role  string
	guest       bool // the node's guest API: judged by its scopes
	connectOnly bool // not the cluster's: only whether it connects
}

// guestCalls are the guest API's paths beyond the anonymous guest:health
// (and Health itself, which may answer).
var guestCalls = []httpCall{
	{method: "GET", path: "/prpc/v1/Health"},
	{method: "GET", path: "/prpc/v1/Info"},
	{method: "GET", path: "/prpc/Info"},
	{method: "GET", path: "/prpc/v1/Version"},
	{method: "GET", path: "/prpc/GetAttestationForAppKey"},
	{method: "GET", path: "/"},
	{method: "GET", path: "/logs/ray"},
	{method: "GET", path: "/logs/agent"},
	{method: "GET", path: "/metrics"},
	{method: "POST", path: "/prpc/GetKey", body: `{"path":"x","algorithm":"ed25519"}`, contentType: "application/json"},
}

// strangerGot lists what the stranger got that it must not: an HTTP 2xx
// from any Ray door or from the guest API beyond Health, any gRPC answer
// (past TLS without the cluster's certificate, or without TLS at all).
func strangerGot(r portReport, guest bool) []string {
	var bad []string
	for _, a := range r.answers {
		if a.err != nil {
			continue
		}
		switch {
		case guest && strings.HasPrefix(a.what, "GET /prpc/v1/Health "):
		case a.grpcStatus != "":
			bad = append(bad, a.String()+": a gRPC answer")
		case a.status >= 200 && a.status < 300:
			bad = append(bad, fmt.Sprintf("%s: %q", a, a.body))
		case a.status == http.StatusBadRequest && strings.HasPrefix(a.body, "Client sent an HTTP request to an HTTPS server"):
			// Go's TLS server (ports A and B) refusing plain HTTP: no handler read it.
		case a.status == http.StatusBadRequest && strings.HasPrefix(a.what, "POST /api/job"):
			// The job handler read the submission: no auth stood before it.
			bad = append(bad, fmt.Sprintf("%s: %q: a job handler without auth", a, a.body))
		}
	}
	return bad
}

// summary is one line per port: the role and what answered.
func (r portReport) summary() string {
	if !r.connected {
		return fmt.Sprintf("%-21s %-34s no connection (%s)", r.target, r.role, shortErr(r.connErr))
	}
	seen := map[string]int{}
	var kinds []string
	for _, a := range r.answers {
		k := "none"
		if a.err == nil {
			k = strconv.Itoa(a.status)
			if a.grpcStatus != "" {
				k += "/grpc-" + a.grpcStatus
			}
		}
		if seen[k] == 0 {
			kinds = append(kinds, k)
		}
		seen[k]++
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s×%d", k, seen[k])
	}
	return fmt.Sprintf("%-21s %-34s connects; answers %s", r.target, r.role, strings.Join(parts, " "))
}
