package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/internal/enrolltest"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// The test binary re-runs itself as the agent (the os/exec tests' way), so
// these tests need neither a build nor root.
const asAgent = "RAYVAST_TEST_RUN_AS_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(asAgent) == "1" {
		// asAgent stays set: main re-executes the binary (secrets out of
		// /proc/PID/environ), and the new image must be the agent again.
		// As a RAYVAST_* name it never reaches Ray.
		os.Args = []string{"agent"}
		main()
	}
	os.Exit(m.Run())
}

// fakeHead is port A on loopback with a certificate from a real cluster CA;
// enroll decides each /enroll answer.
type fakeHead struct {
	ca     *pki.CA
	addr   netip.AddrPort
	calls  atomic.Int32
	enroll func(w http.ResponseWriter, r *http.Request)
}

func newFakeHead(t *testing.T, enroll func(w http.ResponseWriter, r *http.Request)) *fakeHead {
	t.Helper()
	h := &fakeHead{ca: enrolltest.CA(t), enroll: enroll}
	srv, err := h.ca.IssueServer(nil, netip.MustParseAddr("127.0.0.1"), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(srv.CertPEM, srv.KeyPEM.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ca.pem":
			w.Write(h.ca.CertPEM)
		case "/enroll":
			h.calls.Add(1)
			h.enroll(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	h.addr = netip.MustParseAddrPort(s.Listener.Addr().String())
	return h
}

const testToken = "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80"

// agentCmd is the agent run against h with its 64 ports free on loopback
// and a who-am-I resolver that is not there (egress fails; the fake head
// does not judge).
func agentCmd(t *testing.T, h *fakeHead, caSum string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	ports := make([]string, wire.PortCount)
	for i, p := range rvtest.FreePorts(t, "", wire.PortCount) { // the agent listens on all addresses
		ports[i] = fmt.Sprint(p)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{asAgent + "=1", "PATH=" + os.Getenv("PATH"),
		wire.EnvHead + "=127.0.0.1", wire.EnvPortA + "=" + fmt.Sprint(h.addr.Port()), wire.EnvPortB + "=1",
		wire.EnvBootstrapSHA256 + "=" + strings.Repeat("a", 64), wire.EnvCASHA256 + "=" + caSum,
		wire.EnvJoinToken + "=" + testToken, wire.EnvInstanceID + "=run-test", wire.EnvPublicIP + "=127.0.0.1",
		wire.EnvPorts + "=" + strings.Join(ports, ","), wire.EnvEgressResolvers + "=opendns@127.0.0.1:9",
		wire.EnvState + "=" + t.TempDir()}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd, &out
}

func exitCode(t *testing.T, cmd *exec.Cmd, limit time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(limit):
		cmd.Process.Kill()
		t.Fatalf("agent still running after %v", limit)
		return -1
	}
}

// TestRunRetriesThenRejected proves the binary retries /enroll on 503,
// stops at the first 403, prints the reason, and exits 1.
func TestRunRetriesThenRejected(t *testing.T) {
	// The handler counts for itself: reading h from it raced (for the race
	// detector) with the assignment below, ordered only through the agent.
	var tries atomic.Int32
	h := newFakeHead(t, func(w http.ResponseWriter, r *http.Request) {
		n := tries.Add(1)
		var req wire.EnrollRequest
		if err := wire.Decode(r.Body, wire.MaxBody, &req); err != nil || req.JoinToken != testToken {
			w.WriteHeader(http.StatusBadRequest) // the token must survive the agent's re-exec
			return
		}
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error":"rejected","reason":"port_check"}`))
	})
	cmd, out := agentCmd(t, h, h.ca.Fingerprint())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd, 60*time.Second); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if got := h.calls.Load(); got != 3 {
		t.Errorf("/enroll called %d times, want 3 (two 503s, one 403)", got)
	}
	if !strings.Contains(out.String(), "reason=port_check") {
		t.Errorf("the rejection reason is not printed:\n%s", out)
	}
	if strings.Contains(out.String(), testToken) {
		t.Error("the join token was printed")
	}
	if !strings.Contains(out.String(), "not the one RAYVAST_BOOTSTRAP_SHA256 names") {
		t.Error("no warning that the running binary is not the bootstrap hash")
	}
}

// TestRunWrongCA proves a CA that does not match RAYVAST_CA_SHA256 ends
// the agent before it enrolls.
func TestRunWrongCA(t *testing.T) {
	h := newFakeHead(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	cmd, out := agentCmd(t, h, strings.Repeat("0", 64))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd, 30*time.Second); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if h.calls.Load() != 0 || !strings.Contains(out.String(), "does not match RAYVAST_CA_SHA256") {
		t.Errorf("enroll calls %d; output:\n%s", h.calls.Load(), out)
	}
}

// TestRunSignalDuringEnrollment proves SIGTERM before Ray runs ends the
// agent promptly with 128+15, even while /enroll hangs.
func TestRunSignalDuringEnrollment(t *testing.T) {
	entered := make(chan struct{}, 8)
	release := make(chan struct{})
	h := newFakeHead(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select { // hang until the agent goes away (or the test ends)
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	cmd, out := agentCmd(t, h, h.ca.Fingerprint())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("agent never reached /enroll:\n%s", out)
	}
	// The join token crossed the re-exec but is gone from the kernel's copy
	// of the agent's environment, which every same-uid process can read.
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid)); err != nil {
		t.Error(err)
	} else if bytes.Contains(env, []byte(testToken)) {
		t.Error("/proc/PID/environ of the enrolling agent holds the join token")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd, 10*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d\n%s", code, 128+int(syscall.SIGTERM), out)
	}
}
