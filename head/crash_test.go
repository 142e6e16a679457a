package main

import (
	"context"
	"errors"
	"net"
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
	"github.com/rayvast/rayvast/head/server"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// crashHead is one state dir with a real head that can be killed at a
// registry hook point (RAYVAST_TEST_CRASH_AT) and started again.
type crashHead struct {
	bin, state, dir string
	args            []string
	p               *headProc
}

func newCrashHead(t *testing.T, bin string) *crashHead {
	t.Helper()
	dir := t.TempDir()
	h := &crashHead{bin: bin, dir: dir, state: filepath.Join(dir, "state")}
	if out, err := exec.Command(bin, "init", "--state", h.state, "--ip", "127.0.0.1", "--cluster", "kt").CombinedOutput(); err != nil {
		t.Fatalf("head init: %v\n%s", err, out)
	}
	cfg := `{"cluster":"kt","ray":{"head_address":"127.0.0.1:6379"},
	 "node_types":{"cpu":{"gpus":0,"max_workers":4,"resources":{},"labels":{}}},
	 "guest_api":{"anonymous_scopes":[],"external_issuers":[]},"heartbeat_interval_s":5}`
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600)
	os.WriteFile(filepath.Join(dir, "agent"), []byte("agent"), 0o755)
	h.args = []string{"--firewall", "off", // loopback: a private network
		"--state", h.state, "--config", filepath.Join(dir, "config.json"), "--agent", filepath.Join(dir, "agent"),
		"--listen-a", freeAddr(t), "--listen-b", freeAddr(t)}
	return h
}

// start runs head serve, armed to kill itself at point ("" = not armed).
func (h *crashHead) start(t *testing.T, point string) *adminclient.Client {
	t.Helper()
	t.Setenv(server.CrashEnv, point) // "" leaves the child unarmed
	h.p = startServe(t, h.bin, h.args, filepath.Join(h.dir, "head.log"))
	adm := adminclient.Unix(filepath.Join(h.state, statedir.AdminSocket), 30*time.Second)
	waitAdmin(t, adm, h.p)
	return adm
}

// killed waits for the head to die by SIGKILL at its crash point.
func (h *crashHead) killed(t *testing.T, point string) {
	t.Helper()
	select {
	case <-h.p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("head did not reach crash point %s", point)
	}
	ws, _ := h.p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		b, _ := os.ReadFile(filepath.Join(h.dir, "head.log"))
		t.Fatalf("head exited %v, want killed at %s\n%s", h.p.cmd.ProcessState, point, b)
	}
}

func (h *crashHead) candidate(t *testing.T, adm *adminclient.Client, id wire.CandidateRequest) wire.CandidateCreated {
	t.Helper()
	c, err := adm.Create(context.Background(), id)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return c
}

func (h *crashHead) state_(t *testing.T, adm *adminclient.Client, id string) wire.Candidate {
	t.Helper()
	c, err := adm.Candidate(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return c
}

// TestCrashDuringEnrollment kills a real head (SIGKILL, from inside, at the
// exact point) between every pair of steps of an enrollment, restarts it,
// and has the agent retry the same request: every enrollment ends enrolled
// with the certificate of the answer the agent finally got.
func TestCrashDuringEnrollment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the head binary")
	}
	bin := buildHead(t)
	for i, point := range []string{"claim:before-write", "claim:after-write", "slot", "complete:before-write", "complete:after-write"} {
		t.Run(point, func(t *testing.T) {
			h := newCrashHead(t, bin)
			adm := h.start(t, point)
			ip := "127.0.6." + strconv.Itoa(i+1)
			c := h.candidate(t, adm, wire.CandidateRequest{NodeType: "cpu", InstanceID: "k-1", PublicIP: ip})
			baseA := "https://" + net.JoinHostPort(c.Env[wire.EnvHead], c.Env[wire.EnvPortA])
			pool := pinCA(t, baseA, c.Env[wire.EnvCASHA256])
			a, err := fakeagent.Start(ip, fakeagent.Answer)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			req := a.Request("k-1", c.JoinToken, 0)
			if st, body, err := fakeagent.Post(context.Background(), fakeagent.Client(ip, pool, nil), baseA+"/enroll", req); err == nil {
				t.Fatalf("enroll answered %d %s through a crash at %s", st, body, point)
			}
			h.killed(t, point)

			adm = h.start(t, "")
			st, body, err := fakeagent.Post(context.Background(), fakeagent.Client(ip, pool, nil), baseA+"/enroll", req)
			if err != nil || st != 200 {
				t.Fatalf("the agent's retry after the restart: %d %s %v", st, body, err)
			}
			if got := h.state_(t, adm, c.CandidateID); got.State != wire.StateEnrolled {
				t.Errorf("candidate %s after the retry, want enrolled", got.State)
			}
			var resp wire.EnrollResponse
			wire.Decode(strings.NewReader(string(body)), 1<<20, &resp)
			kp, err := fakeagent.KeyPair(resp)
			if err != nil {
				t.Fatal(err)
			}
			baseB := "https://" + net.JoinHostPort(c.Env[wire.EnvHead], c.Env[wire.EnvPortB])
			heartbeat(t, fakeagent.Client(ip, pool, &kp), baseB, "k-1", 1)
			// Someone else with the token (another port_key) is still refused.
			other, _ := fakeagent.Start(ip, fakeagent.Answer)
			defer other.Close()
			if st, body, _ := fakeagent.Post(context.Background(), fakeagent.Client(ip, pool, nil), baseA+"/enroll", other.Request("k-1", c.JoinToken, 0)); st != 403 || string(body) != `{"error":"refused"}` {
				t.Errorf("another port_key after the restart: %d %s, want the refusal", st, body)
			}
			h.p.stop(t)
		})
	}
}

// TestCrashDuringDelete kills a real head on either side of a DELETE's
// write: after the restart the node is enrolled (the DELETE never answered;
// its retry ends it) or ended, never half of each.
func TestCrashDuringDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the head binary")
	}
	bin := buildHead(t)
	for i, c := range []struct{ point, after string }{
		{"end:before-write", wire.StateEnrolled},
		{"end:after-write", wire.StateEnded},
	} {
		t.Run(c.point, func(t *testing.T) {
			h := newCrashHead(t, bin)
			adm := h.start(t, c.point)
			ip := "127.0.7." + strconv.Itoa(i+1)
			cand := h.candidate(t, adm, wire.CandidateRequest{NodeType: "cpu", InstanceID: "d-1", PublicIP: ip})
			baseA := "https://" + net.JoinHostPort(cand.Env[wire.EnvHead], cand.Env[wire.EnvPortA])
			pool := pinCA(t, baseA, cand.Env[wire.EnvCASHA256])
			_, kp := enrollOK(t, baseA, pool, ip, "d-1", cand.JoinToken)
			// The head must die mid-DELETE: any answer, a refusal included, is wrong.
			if err := adm.End(context.Background(), cand.CandidateID); err == nil || errors.As(err, new(*adminclient.StatusError)) {
				t.Fatalf("DELETE answered (%v) through a crash at %s", err, c.point)
			}
			h.killed(t, c.point)

			adm = h.start(t, "")
			if got := h.state_(t, adm, cand.CandidateID); got.State != c.after {
				t.Errorf("after the restart the candidate is %s, want %s", got.State, c.after)
			}
			baseB := "https://" + net.JoinHostPort(cand.Env[wire.EnvHead], cand.Env[wire.EnvPortB])
			st, _, _ := fakeagent.Post(context.Background(), fakeagent.Client(ip, pool, &kp), baseB+"/heartbeat",
				wire.Heartbeat{Version: 2, InstanceID: "d-1", Seq: 1, Ray: wire.RayStatus{State: wire.RayRunning}})
			if want := map[string]int{wire.StateEnrolled: 200, wire.StateEnded: 403}[c.after]; st != want {
				t.Errorf("heartbeat after the restart: %d, want %d", st, want)
			}
			if err := adm.End(context.Background(), cand.CandidateID); err != nil {
				t.Errorf("retried DELETE: %v, want 204", err)
			}
			if got := h.state_(t, adm, cand.CandidateID); got.State != wire.StateEnded {
				t.Errorf("after the retried DELETE: %s, want ended", got.State)
			}
			h.p.stop(t)
		})
	}
}

// TestOneHeadPerStateDir: a second head serve on the same dir exits 1
// naming the first's PID while head status still works; a store that
// vanished from a dir that served makes the head refuse to start.
func TestOneHeadPerStateDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the head binary")
	}
	bin := buildHead(t)
	h := newCrashHead(t, bin)
	h.start(t, "")
	second := append([]string{"serve"}, h.args...)
	second[len(second)-3], second[len(second)-1] = freeAddr(t), freeAddr(t) // other ports: only the dir is shared
	out, err := exec.Command(bin, second...).CombinedOutput()
	pid := strconv.Itoa(h.p.cmd.Process.Pid)
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "pid "+pid) {
		t.Errorf("second serve: exit %d %s, want 1 naming pid %s", code, out, pid)
	}
	if out, err := exec.Command(bin, "status", "--state", h.state).CombinedOutput(); err != nil {
		t.Errorf("head status beside a running head: %v %s", err, out)
	}
	if code := h.p.stop(t); code != 0 {
		t.Fatalf("stop: %d", code)
	}

	os.Remove(filepath.Join(h.state, statedir.Store))
	out, err = exec.Command(bin, append([]string{"serve"}, h.args...)...).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "store_id") || !strings.Contains(string(out), "backup") {
		t.Errorf("serve with the store gone: exit %d %s, want 1 saying what is wrong and how to recover", code, out)
	}
	if _, err := os.Stat(filepath.Join(h.state, statedir.Store)); err == nil {
		t.Error("a refused start made a new empty store")
	}
}

// TestStoppedHeadLosesNoNode: kill -STOP of a real head for 5 heartbeat
// intervals, then -CONT: the node, silent to the head only because the head
// could not listen, is not lost and its next heartbeat is accepted.
func TestStoppedHeadLosesNoNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the head binary")
	}
	bin := buildHead(t)
	h := newCrashHead(t, bin)
	cfg := filepath.Join(h.dir, "config.json")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), `"heartbeat_interval_s":5`, `"heartbeat_interval_s":1`, 1)), 0o600)
	adm := h.start(t, "")
	ip := "127.0.8.1"
	c := h.candidate(t, adm, wire.CandidateRequest{NodeType: "cpu", InstanceID: "s-1", PublicIP: ip})
	baseA := "https://" + net.JoinHostPort(c.Env[wire.EnvHead], c.Env[wire.EnvPortA])
	pool := pinCA(t, baseA, c.Env[wire.EnvCASHA256])
	_, kp := enrollOK(t, baseA, pool, ip, "s-1", c.JoinToken)
	baseB := "https://" + net.JoinHostPort(c.Env[wire.EnvHead], c.Env[wire.EnvPortB])
	hb := fakeagent.Client(ip, pool, &kp)
	heartbeat(t, hb, baseB, "s-1", 1)

	h.p.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(5 * time.Second)
	h.p.cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(500 * time.Millisecond) // several sweeps at a 1 s interval
	if got := h.state_(t, adm, c.CandidateID); got.State != wire.StateEnrolled {
		t.Fatalf("after a 5-interval stop the candidate is %s (%s), want enrolled", got.State, got.Reason)
	}
	heartbeat(t, hb, baseB, "s-1", 2)
	// Silence while the head runs is still noticed: 3 intervals → lost,
	// and handed to the (external) provider to destroy.
	if !rvtest.Until(10*time.Second, func() bool { return h.state_(t, adm, c.CandidateID).Reason == "lost" }) {
		t.Fatal("a node silent while the head ran was not lost within 10 s")
	}
	h.p.stop(t)
}
