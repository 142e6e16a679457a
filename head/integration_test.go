package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// headProc is one `head serve` process.
type headProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

func buildHead(t *testing.T) string {
	t.Helper()
	return rvtest.Build(t, t.TempDir(), "./head")
}

// freeAddr is a loopback address the head binds next, from outside the
// ephemeral range so no connection takes it meanwhile.
func freeAddr(t *testing.T) string {
	t.Helper()
	return rvtest.FreeAddr(t, "127.0.0.1")
}

func startServe(t *testing.T, bin string, args []string, logPath string) *headProc {
	t.Helper()
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	// Loopback only, a private network: the firewall off unless args say.
	cmd := exec.Command(bin, append([]string{"serve", "--firewall", "off"}, args...)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &headProc{cmd: cmd, done: make(chan struct{}), log: lf}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-p.done; lf.Close() })
	return p
}

// stop sends SIGTERM and returns the exit code.
func (p *headProc) stop(t *testing.T) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		t.Fatal("head did not exit within 40 s of SIGTERM")
	}
	return p.cmd.ProcessState.ExitCode()
}

func waitAdmin(t *testing.T, c *adminclient.Client, p *headProc) {
	t.Helper()
	rvtest.WaitFor(t, 30*time.Second, func() error {
		select {
		case <-p.done:
			t.Fatalf("head serve exited: %v", p.cmd.ProcessState)
		default:
		}
		if _, err := c.Candidates(context.Background()); err != nil {
			return fmt.Errorf("admin socket did not answer: %w", err)
		}
		return nil
	})
}

// TestHeadBinary runs the real binary: init, serve, create candidates over
// admin.sock, enroll one with a client written from docs/protocol.md §6, heartbeat,
// SIGTERM (exit 0), restart, heartbeat again, enroll the candidate made
// before the restart, SIGTERM during an in-flight enrollment (it finishes,
// exit 0), and finally grep everything the head wrote for every secret.
func TestHeadBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the head binary")
	}
	bin := buildHead(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	out, err := exec.Command(bin, "init", "--state", state, "--ip", "127.0.0.1", "--cluster", "it").CombinedOutput()
	if err != nil {
		t.Fatalf("head init: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "init", "--state", state, "--ip", "127.0.0.1").CombinedOutput(); err == nil {
		t.Fatalf("second head init succeeded: %s", out)
	}
	cfg := `{"cluster":"it","ray":{"head_address":"127.0.0.1:6379"},
	 "node_types":{"cpu":{"gpus":0,"max_workers":4,"resources":{"cpu_slot":2},"labels":{"k":"v"}}},
	 "guest_api":{"anonymous_scopes":["guest:version"],"external_issuers":[]},"heartbeat_interval_s":5}`
	cfgPath := filepath.Join(dir, "config.json")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	agentBin := []byte("pretend agent binary " + strconv.Itoa(os.Getpid()))
	agentPath := filepath.Join(dir, "agent")
	os.WriteFile(agentPath, agentBin, 0o755)
	addrA, addrB := freeAddr(t), freeAddr(t)
	args := []string{"--state", state, "--config", cfgPath, "--agent", agentPath, "--listen-a", addrA, "--listen-b", addrB}
	logPath := filepath.Join(dir, "head.log")

	// Bad config: exit 2 with the reason.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(strings.Replace(cfg, "guest:version", "guest:root", 1)), 0o600)
	badOut, err := exec.Command(bin, "serve", "--state", state, "--config", bad, "--agent", agentPath, "--listen-a", addrA, "--listen-b", addrB).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(badOut), "unknown scope") {
		t.Errorf("bad config: exit %d %s, want 2 naming the unknown scope", code, badOut)
	}

	p := startServe(t, bin, args, logPath)
	adm := adminclient.Unix(filepath.Join(state, statedir.AdminSocket), 30*time.Second)
	waitAdmin(t, adm, p)
	if fi, err := os.Stat(filepath.Join(state, statedir.AdminSocket)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("admin.sock mode %v %v, want 0600", fi.Mode().Perm(), err)
	}

	ctx := context.Background()
	c1, err := adm.Create(ctx, wire.CandidateRequest{NodeType: "cpu", InstanceID: "it-1", PublicIP: "127.0.4.1", HostID: "h1"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	c2, err := adm.Create(ctx, wire.CandidateRequest{NodeType: "cpu"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	// The external provider learns instance and IP later: PATCH.
	if patched, err := adm.Patch(ctx, c2.CandidateID, wire.CandidatePatch{InstanceID: "it-2", PublicIP: "127.0.4.2"}); err != nil || patched.State != wire.StateRunning {
		t.Fatalf("patch: %v %s", err, patched.State)
	}

	// A hand-written client following docs/protocol.md §5–§6 from the env alone.
	env := c1.Env
	agentSum := sha256.Sum256(agentBin)
	if env[wire.EnvBootstrapSHA256] != hex.EncodeToString(agentSum[:]) || env[wire.EnvHead] != "127.0.0.1" ||
		env[wire.EnvJoinToken] != c1.JoinToken || env[wire.EnvInstanceID] != "it-1" || env[wire.EnvPublicIP] != "127.0.4.1" {
		t.Fatalf("env %v", env)
	}
	baseA := "https://" + net.JoinHostPort(env[wire.EnvHead], env[wire.EnvPortA])
	pool := pinCA(t, baseA, env[wire.EnvCASHA256])
	resp1, node1 := enrollOK(t, baseA, pool, "127.0.4.1", "it-1", c1.JoinToken)
	baseB := "https://" + net.JoinHostPort(env[wire.EnvHead], strconv.Itoa(resp1.Heartbeat.Port))
	if env[wire.EnvPortB] != strconv.Itoa(resp1.Heartbeat.Port) || resp1.Heartbeat.IntervalS != 5 {
		t.Errorf("port B %s vs bundle %+v", env[wire.EnvPortB], resp1.Heartbeat)
	}
	hbClient := fakeagent.Client("127.0.4.1", pool, &node1)
	heartbeat(t, hbClient, baseB, "it-1", 1)

	if code := p.stop(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d, want 0", code)
	}

	// Restart: the node keeps heartbeating, the candidate from before enrolls.
	p = startServe(t, bin, args, logPath)
	waitAdmin(t, adm, p)
	heartbeat(t, hbClient, baseB, "it-1", 2)
	resp2, _ := enrollOK(t, baseA, pool, "127.0.4.2", "it-2", c2.JoinToken)

	nodes, err := adm.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].Seq != 2 || nodes[0].State != wire.StateEnrolled {
		t.Errorf("nodes after restart: %+v", nodes)
	}

	// DELETE: the node's heartbeats are refused from then on.
	node2, _ := fakeagent.KeyPair(resp2)
	hb2 := fakeagent.Client("127.0.4.2", pool, &node2)
	heartbeat(t, hb2, baseB, "it-2", 1)
	if err := adm.End(ctx, c2.CandidateID); err != nil {
		t.Errorf("DELETE: %v", err)
	}
	if st, body, hdr, _ := fakeagent.PostFull(context.Background(), hb2, baseB+"/heartbeat", wire.Heartbeat{Version: 2, InstanceID: "it-2", Seq: 2}); st != 403 || string(body) != `{"error":"forbidden"}` || hdr.Get(wire.NodeStatusHeader) != wire.NodeUnknown {
		t.Errorf("heartbeat after DELETE: %d %s %s=%q, want 403 forbidden, unknown node", st, body, wire.NodeStatusHeader, hdr.Get(wire.NodeStatusHeader))
	}

	// Slow clients are cut off in seconds, not minutes.
	slowA, slowB := slowClientCut(t, addrA), slowClientCut(t, addrB)
	slowHeaders := slowHeadersCut(t, addrA, pool)

	// Metrics and head status see what happened.
	mtext, err := adm.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`rayvast_enrollments_total{outcome="enrolled"} 1`, `rayvast_heartbeats_total 2`,
		`rayvast_nodes{state="enrolled"} 1`, `rayvast_nodes{state="ended"} 1`, `rayvast_refusals_total{endpoint="port_b",reason="not_enrolled_or_ended"} 1`,
		// the port check gate is wired in: idle, nothing running or waiting
		`rayvast_port_checks{kind="running"} 0`, `rayvast_port_checks{kind="waiting"} 0`} {
		if !strings.Contains(mtext, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, mtext)
		}
	}
	// A node image with an old Ray: refused ray_version, shown in status.
	c4, err := adm.Create(ctx, wire.CandidateRequest{NodeType: "cpu", InstanceID: "it-4", PublicIP: "127.0.4.4"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	oldRay := func() int {
		a, err := fakeagent.Start("127.0.4.4", fakeagent.Answer)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		req := a.Request("it-4", c4.JoinToken, 0)
		req.RayVersion = "2.47.1"
		st, _, _ := fakeagent.Post(context.Background(), fakeagent.Client("127.0.4.4", pool, nil), baseA+"/enroll", req)
		return st
	}()
	statusOut, err := exec.Command(bin, "status", "--state", state).CombinedOutput()
	if err != nil || !strings.Contains(string(statusOut), "it-1") || !strings.Contains(string(statusOut), c2.CandidateID) {
		t.Errorf("head status: %v\n%s", err, statusOut)
	}
	if line := lineWith(string(statusOut), c4.CandidateID); oldRay != 403 || !strings.Contains(line, wire.ReasonRayVersion) {
		t.Errorf("old ray: enroll %d; status line %q, want ray_version", oldRay, line)
	}
	if logs, _ := os.ReadFile(logPath); !strings.Contains(string(logs), "ray_version=2.47.1") {
		t.Errorf("head log does not name the node's ray version")
	}
	if d := <-slowA; d > 20*time.Second {
		t.Errorf("a silent client held port A for %v", d)
	}
	if d := <-slowB; d > 20*time.Second {
		t.Errorf("a silent client held port B for %v", d)
	}
	if d := <-slowHeaders; d > 20*time.Second {
		t.Errorf("a client sending half its headers held port A for %v", d)
	}

	// SIGTERM during an enrollment whose port check is slow: it finishes.
	c3, err := adm.Create(ctx, wire.CandidateRequest{NodeType: "cpu", InstanceID: "it-3", PublicIP: "127.0.4.3"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	silent, err := fakeagent.Start("127.0.4.3", fakeagent.Silent)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	type result struct {
		st   int
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		st, b, err := fakeagent.Post(context.Background(), fakeagent.Client("127.0.4.3", pool, nil), baseA+"/enroll", silent.Request("it-3", c3.JoinToken, 0))
		done <- result{st, string(b), err}
	}()
	select { // wait until the request is in its port check
	case <-silent.Challenged():
	case r := <-done:
		t.Fatalf("enrollment answered before its port check: %d %s %v", r.st, r.body, r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the head never challenged the silent candidate's ports")
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("SIGTERM during enrollment: exit %d", code)
	}
	r := <-done
	if r.err != nil || r.st != 403 || !strings.Contains(r.body, wire.ReasonPortCheck) {
		t.Errorf("in-flight enrollment across SIGTERM: %d %s %v, want it answered (403 port_check)", r.st, r.body, r.err)
	}

	// Secrets never reach the head's output.
	logs, _ := os.ReadFile(logPath)
	caKey, _ := os.ReadFile(filepath.Join(state, statedir.CAKey))
	st, err := statedir.Load(state)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"join token 1": c1.JoinToken, "join token 2": c2.JoinToken, "join token 3": c3.JoinToken,
		"cluster token": st.ClusterToken.Reveal(), "app root key": resp1.AppRootKey,
		"app root key raw b64url": base64.RawURLEncoding.EncodeToString(st.AppRootKey.Reveal()),
		"node key 1":              keyBody(resp1.NodeKey), "node key 2": keyBody(resp2.NodeKey), "ca key": keyBody(string(caKey)),
		"port key": base64.StdEncoding.EncodeToString(silent.PortKey), "health token": "health.token.it-1",
	}
	for name, s := range secrets {
		if s == "" {
			t.Errorf("secret %s is empty: the test is broken", name)
			continue
		}
		if bytes.Contains(logs, []byte(s)) {
			t.Errorf("head output contains the %s", name)
		}
	}
	if !bytes.Contains(logs, []byte("enrolled")) || !bytes.Contains(logs, []byte("stopped")) {
		t.Errorf("head log lacks the expected lines:\n%s", logs)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// keyBody is a line from the middle of a PEM key, enough to find it in a log.
func keyBody(pemText string) string {
	lines := strings.Split(strings.TrimSpace(pemText), "\n")
	if len(lines) < 3 {
		return ""
	}
	return lines[1]
}

// pinCA fetches /ca.pem without verifying and checks its fingerprint (docs/protocol.md §5 step 2).
func pinCA(t *testing.T, baseA, want string) *x509.CertPool {
	t.Helper()
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := insecure.Get(baseA + "/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cert, err := pki.ParseCert(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := pki.Fingerprint(cert.Raw); got != want {
		t.Fatalf("CA fingerprint %s, env says %s", got, want)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

func enrollOK(t *testing.T, baseA string, pool *x509.CertPool, ip, inst, token string) (wire.EnrollResponse, tls.Certificate) {
	t.Helper()
	a, err := fakeagent.Start(ip, fakeagent.Answer)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	st, body, err := fakeagent.Post(context.Background(), fakeagent.Client(ip, pool, nil), baseA+"/enroll", a.Request(inst, token, 0))
	if err != nil || st != 200 {
		t.Fatalf("enroll %s: %d %s %v", inst, st, body, err)
	}
	var resp wire.EnrollResponse
	if err := wire.Decode(bytes.NewReader(body), 1<<20, &resp); err != nil {
		t.Fatal(err)
	}
	kp, err := fakeagent.KeyPair(resp)
	if err != nil {
		t.Fatal(err)
	}
	return resp, kp
}

func heartbeat(t *testing.T, c *http.Client, baseB, inst string, seq int64) {
	t.Helper()
	hb := wire.Heartbeat{Version: 2, InstanceID: inst, Seq: seq, Ray: wire.RayStatus{State: wire.RayRunning, PID: 7}, HealthToken: "health.token." + inst}
	st, body, err := fakeagent.Post(context.Background(), c, baseB+"/heartbeat", hb)
	if err != nil || st != 200 || !strings.Contains(string(body), `"action":"none"`) {
		t.Fatalf("heartbeat %d: %d %s %v", seq, st, body, err)
	}
}

// slowClientCut opens a connection that sends half a TLS hello and then
// nothing, and reports how long the head kept it open.
func slowClientCut(t *testing.T, addr string) <-chan time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan time.Duration, 1)
	go func() {
		defer c.Close()
		start := time.Now()
		c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00}) // a record header promising 512 bytes
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		io.Copy(io.Discard, c)
		out <- time.Since(start)
	}()
	return out
}

// TestHelp: every subcommand answers --help with exit 0 and its usage line.
func TestHelp(t *testing.T) {
	for _, cmd := range []string{"init", "serve", "status", "up", "image-check"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{cmd, "--help"}, &out, &errb)
		if code != 0 || !strings.Contains(errb.String()+out.String(), "usage: head "+cmd) {
			t.Errorf("head %s --help: exit %d, %q", cmd, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "serve") {
		t.Errorf("head --help: %d %q", code, out.String())
	}
	if code := run(context.Background(), []string{"frobnicate"}, &out, &errb); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
	if code := run(context.Background(), []string{"serve", "--state", "x"}, &out, &errb); code != 2 {
		t.Errorf("serve without required flags: exit %d, want 2", code)
	}
}

// slowHeadersCut completes TLS, sends half a request header and then
// nothing, and reports how long the head kept the connection open.
func slowHeadersCut(t *testing.T, addr string, pool *x509.CertPool) <-chan time.Duration {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan time.Duration, 1)
	go func() {
		defer c.Close()
		start := time.Now()
		io.WriteString(c, "POST /enroll HTTP/1.1\r\nHost: head\r\nContent-Le")
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		io.Copy(io.Discard, c)
		out <- time.Since(start)
	}()
	return out
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
