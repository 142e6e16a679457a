package bootloader_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// joinToken is a marker no output of the bootloader may contain.
const joinToken = "JOINTOKEN-MARKER-b1e4c0ffee-must-never-be-printed"

// agentScript stands in for the agent binary: it writes what the bootloader
// handed it (its PID, RAYVAST_PYTHON, its own path, args, the join token) to
// the marker file, and nothing to stdout or stderr.
const agentScript = `#!/bin/sh
printf '%s\n' "pid=$$" "python=$RAYVAST_PYTHON" "self=$0" "args=$*" "token=$RAYVAST_JOIN_TOKEN" >"$BOOTTEST_MARK"
`

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func scriptPath(t testing.TB) string { return filepath.Join(rvtest.ModuleRoot(t), "bootloader.sh") }

func fakerayDir(t testing.TB) string { return filepath.Join(rvtest.ModuleRoot(t), "test", "fakeray") }

// shell is one POSIX shell the bootloader must run under.
type shell struct {
	name string
	argv []string
}

// shells returns dash, bash and busybox ash; a missing one is skipped loudly
// by the subtest (a failure when CI=true: .ci/run installs them).
func shells() []shell {
	return []shell{
		{"dash", []string{"dash"}},
		{"bash", []string{"bash"}},
		{"busybox_ash", []string{"busybox", "ash"}},
	}
}

func forEachShell(t *testing.T, f func(t *testing.T, sh shell)) {
	for _, sh := range shells() {
		t.Run(sh.name, func(t *testing.T) {
			rvtest.NeedTools(t, sh.argv[0]) // apt-get install it
			f(t, sh)
		})
	}
}

// pythons returns the distinct real interpreters on this machine (pyenv's,
// Debian's), so the tests do not depend on which one python3 is.
func pythons(t testing.TB) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, c := range []string{"python3", "/usr/bin/python3", "/usr/local/bin/python3"} {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		b, err := exec.Command(p, "-c", "import sys;print(sys.executable)").Output()
		exe := strings.TrimSpace(string(b))
		if err != nil || exe == "" {
			continue
		}
		if real, err := filepath.EvalSymlinks(exe); err == nil && !seen[real] {
			seen[real] = true
			out = append(out, exe)
		}
	}
	if len(out) == 0 {
		t.Fatal("no python3 on this machine: the bootloader tests need one")
	}
	return out
}

// head is a local HTTPS server standing in for the head's port A, with a
// self-signed certificate the bootloader must accept.
type head struct {
	*httptest.Server
	requests atomic.Int32
}

func (h *head) port() string {
	_, p, _ := net.SplitHostPort(h.Listener.Addr().String())
	return p
}

// newHead starts (unless ln is given and nil-started later) an HTTPS server on
// ln, or on 127.0.0.1:0 when ln is nil.
func newHead(t testing.TB, ln net.Listener, serve func(n int32, w http.ResponseWriter, r *http.Request)) *head {
	t.Helper()
	h := &head{}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := h.requests.Add(1)
		if r.URL.Path != "/bootstrap" {
			http.NotFound(w, r)
			return
		}
		serve(n, w, r)
	}))
	if ln != nil {
		h.Listener.Close()
		h.Listener = ln
	}
	h.StartTLS()
	t.Cleanup(h.Close)
	return h
}

// serveBytes answers every request with b.
func serveBytes(b []byte) func(int32, http.ResponseWriter, *http.Request) {
	return func(_ int32, w http.ResponseWriter, _ *http.Request) { w.Write(b) }
}

// env is one bootloader run's environment, built from nothing so the test
// machine's own variables (PYTHONPATH, proxies, RAYVAST_*) cannot leak in.
type env map[string]string

func (e env) list() []string {
	var l []string
	for k, v := range e {
		l = append(l, k+"="+v)
	}
	return l
}

// setup is what a run needs: dirs, the agent bytes and a default env that
// should succeed against h.
type setup struct {
	tmp   string // TMPDIR of the run: the bootloader's temp dir goes here
	mark  string // the agent's marker file
	agent []byte
	env   env
}

func newSetup(t testing.TB, python string) *setup {
	t.Helper()
	s := &setup{tmp: t.TempDir(), agent: []byte(agentScript)}
	s.mark = filepath.Join(t.TempDir(), "agent-ran")
	s.env = env{
		"PATH":                     "/usr/bin:/bin",
		"HOME":                     t.TempDir(),
		"TMPDIR":                   s.tmp,
		"PYTHONPATH":               fakerayDir(t),
		"BOOTTEST_MARK":            s.mark,
		"RAYVAST_HEAD":             "127.0.0.1",
		"RAYVAST_BOOTSTRAP_SHA256": sha(s.agent),
		"RAYVAST_JOIN_TOKEN":       joinToken,
		"RAYVAST_PYTHON":           python,
		"RAYVAST_BOOT_TRIES":       "3",
		"RAYVAST_BOOT_MAXWAIT":     "1",
	}
	return s
}

// proc is a running bootloader whose stderr lines can be watched as they come.
type proc struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stdout bytes.Buffer
	mu     sync.Mutex
	stderr bytes.Buffer
	lines  chan string
	eof    chan struct{}
}

// start runs prefix… bootloader.sh args… with e. The context's deadline only
// guards against a hung run; no assertion depends on timing.
func start(t testing.TB, prefix []string, e env, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	argv := append(append(append([]string{}, prefix...), scriptPath(t)), args...)
	p := &proc{cancel: cancel, lines: make(chan string, 1000), eof: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	p.cmd.Env = e.list()
	p.cmd.Stdout = &p.stdout
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %v: %v", argv, err)
	}
	go func() {
		defer close(p.eof)
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	return p
}

// result is what a finished run left behind.
type result struct {
	code           int // -1 when killed by a signal
	stdout, stderr string
}

// wait ends the run and checks the rule every run must keep: the join token
// is never printed.
func (p *proc) wait(t testing.TB) result {
	t.Helper()
	<-p.eof
	p.cmd.Wait()
	p.cancel()
	p.mu.Lock()
	r := result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
	p.mu.Unlock()
	if strings.Contains(r.stdout+r.stderr, joinToken) {
		t.Errorf("the bootloader printed the join token:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
	return r
}

func run(t testing.TB, prefix []string, e env, args ...string) result {
	t.Helper()
	return start(t, prefix, e, args...).wait(t)
}

// waitForLines blocks until n stderr lines containing sub have been seen.
func (p *proc) waitForLines(t testing.TB, sub string, n int) {
	t.Helper()
	for seen := 0; seen < n; {
		select {
		case l := <-p.lines:
			if strings.Contains(l, sub) {
				seen++
			}
		case <-p.eof:
			t.Fatalf("bootloader ended before %d lines with %q; stderr:\n%s", n, sub, p.stderr.String())
		}
	}
}

// agentRan parses the agent's marker file; ok is false when it does not exist.
func agentRan(t testing.TB, mark string) (got map[string]string, ok bool) {
	t.Helper()
	b, err := os.ReadFile(mark)
	if os.IsNotExist(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	return got, true
}

// assertNothingRan checks a refused run: non-zero exit, no agent, and no file
// left in TMPDIR (the download was deleted).
func assertNothingRan(t testing.TB, s *setup, r result) {
	t.Helper()
	if r.code == 0 {
		t.Errorf("exit code 0, want non-zero; stderr:\n%s", r.stderr)
	}
	if got, ok := agentRan(t, s.mark); ok {
		t.Errorf("the agent ran (%v), want nothing executed", got)
	}
	left, _ := os.ReadDir(s.tmp)
	if len(left) != 0 {
		t.Errorf("TMPDIR holds %d entries (%s…), want the download deleted", len(left), left[0].Name())
	}
}
