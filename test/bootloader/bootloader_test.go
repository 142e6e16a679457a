package bootloader_test

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestSuccess: under every shell and with every Python on the machine, the
// bootloader fetches the agent over self-signed TLS, checks it and execs it
// from a private dir, with RAYVAST_PYTHON, the args and the join token.
func TestSuccess(t *testing.T) {
	pys := pythons(t)
	forEachShell(t, func(t *testing.T, sh shell) {
		for _, py := range pys {
			t.Run(strings.ReplaceAll(strings.TrimPrefix(py, "/"), "/", "_"), func(t *testing.T) {
				s := newSetup(t, py)
				h := newHead(t, nil, serveBytes(s.agent))
				s.env["RAYVAST_PORT_A"] = h.port()
				r := run(t, sh.argv, s.env, "one", "two")
				got, ok := agentRan(t, s.mark)
				if r.code != 0 || !ok {
					t.Fatalf("exit %d, agent ran %v; stderr:\n%s", r.code, ok, r.stderr)
				}
				want := map[string]string{"python": py, "args": "one two", "token": joinToken}
				for k, v := range want {
					if got[k] != v {
						t.Errorf("agent's %s = %q, want %q", k, got[k], v)
					}
				}
				if r.stdout != "" || r.stderr != "" {
					t.Errorf("a clean run printed stdout %q stderr %q, want nothing", r.stdout, r.stderr)
				}
				checkPrivate(t, s, got["self"])
			})
		}
	})
}

// TestIgnoresProxy: proxy variables in the image do not divert the download
// (the head admits the container's own IP only): a dead proxy changes nothing.
func TestIgnoresProxy(t *testing.T) {
	py := pythons(t)[0]
	forEachShell(t, func(t *testing.T, sh shell) {
		s := newSetup(t, py)
		h := newHead(t, nil, serveBytes(s.agent))
		s.env["RAYVAST_PORT_A"] = h.port()
		for _, k := range []string{"https_proxy", "HTTPS_PROXY", "all_proxy"} {
			s.env[k] = "http://127.0.0.1:1"
		}
		r := run(t, sh.argv, s.env)
		if _, ok := agentRan(t, s.mark); r.code != 0 || !ok {
			t.Fatalf("exit %d, agent ran %v; stderr:\n%s", r.code, ok, r.stderr)
		}
	})
}

// checkPrivate proves the agent ran from a 0700 file in a new 0700 dir under
// TMPDIR holding exactly the served bytes.
func checkPrivate(t *testing.T, s *setup, self string) {
	t.Helper()
	if filepath.Dir(filepath.Dir(self)) != s.tmp {
		t.Fatalf("agent ran from %q, want a new dir under TMPDIR %q", self, s.tmp)
	}
	for _, p := range []string{self, filepath.Dir(self)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o700 {
			t.Errorf("mode of %s = %o, want 700", p, got)
		}
	}
	if b, _ := os.ReadFile(self); string(b) != string(s.agent) {
		t.Errorf("executed file differs from the served agent")
	}
}

// TestFindsPython: with RAYVAST_PYTHON unset or unusable the bootloader takes
// python3 from PATH and hands the agent its absolute path.
func TestFindsPython(t *testing.T) {
	py := pythons(t)[0]
	bin := t.TempDir()
	if err := os.Symlink(py, filepath.Join(bin, "python3")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, rayvastPython string
	}{
		{"unset", ""},
		{"missing_file", "/nonexistent/python"},
		{"not_a_python", "/bin/false"},
	}
	forEachShell(t, func(t *testing.T, sh shell) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := newSetup(t, c.rayvastPython)
				if c.rayvastPython == "" {
					delete(s.env, "RAYVAST_PYTHON")
				}
				s.env["PATH"] = bin + ":/usr/bin:/bin"
				h := newHead(t, nil, serveBytes(s.agent))
				s.env["RAYVAST_PORT_A"] = h.port()
				r := run(t, sh.argv, s.env)
				got, ok := agentRan(t, s.mark)
				if r.code != 0 || !ok {
					t.Fatalf("exit %d, agent ran %v; stderr:\n%s", r.code, ok, r.stderr)
				}
				if want := filepath.Join(bin, "python3"); got["python"] != want {
					t.Errorf("RAYVAST_PYTHON = %q, want %q", got["python"], want)
				}
			})
		}
	})
}

// TestRefusesBadDownload: a body whose SHA-256 is not the expected one, short
// or empty (even when the env names the empty file's hash), is deleted and
// never executed; the bootloader does not retry.
func TestRefusesBadDownload(t *testing.T) {
	py := pythons(t)[0]
	cases := []struct {
		name string
		body func(agent []byte) []byte
		want string
		// sameHash sets RAYVAST_BOOTSTRAP_SHA256 to the body's own hash.
		sameHash bool
	}{
		{"wrong_hash", func(a []byte) []byte { return append([]byte("#tampered\n"), a...) }, "SHA-256", false},
		{"short", func(a []byte) []byte { return a[:len(a)/2] }, "got %d bytes", false},
		{"empty", func([]byte) []byte { return nil }, "got 0 bytes", false},
		{"empty_matching_hash", func([]byte) []byte { return nil }, "got 0 bytes", true},
	}
	forEachShell(t, func(t *testing.T, sh shell) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := newSetup(t, py)
				body := c.body(s.agent)
				h := newHead(t, nil, serveBytes(body))
				s.env["RAYVAST_PORT_A"] = h.port()
				if c.sameHash {
					s.env["RAYVAST_BOOTSTRAP_SHA256"] = sha(body)
				}
				r := run(t, sh.argv, s.env)
				assertNothingRan(t, s, r)
				want := strings.Replace(c.want, "%d", strconv.Itoa(len(body)), 1)
				for _, w := range []string{want, "RAYVAST_BOOTSTRAP_SHA256", "deleted, not run"} {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("stderr %q lacks %q", r.stderr, w)
					}
				}
				if n := h.requests.Load(); n != 1 {
					t.Errorf("%d requests, want 1: a hash mismatch is final", n)
				}
			})
		}
	})
}

// TestTruncatedTransfer: the head announces the full length, sends half and
// drops the connection. That is a network failure: retried, then given up,
// and nothing is executed or left behind.
func TestTruncatedTransfer(t *testing.T) {
	py := pythons(t)[0]
	forEachShell(t, func(t *testing.T, sh shell) {
		t.Parallel()
		s := newSetup(t, py)
		h := newHead(t, nil, func(_ int32, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(s.agent)))
			w.Write(s.agent[:len(s.agent)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		})
		s.env["RAYVAST_PORT_A"] = h.port()
		r := run(t, sh.argv, s.env)
		assertNothingRan(t, s, r)
		if n := h.requests.Load(); n != 3 {
			t.Errorf("%d requests, want RAYVAST_BOOT_TRIES=3", n)
		}
		if !strings.Contains(r.stderr, "gave up") {
			t.Errorf("stderr %q lacks %q", r.stderr, "gave up")
		}
	})
}

// TestRetriesHeadErrors: a head that answers 503 twice, then the agent, is
// retried and the agent runs.
func TestRetriesHeadErrors(t *testing.T) {
	py := pythons(t)[0]
	forEachShell(t, func(t *testing.T, sh shell) {
		t.Parallel()
		s := newSetup(t, py)
		h := newHead(t, nil, func(n int32, w http.ResponseWriter, _ *http.Request) {
			if n <= 2 {
				http.Error(w, "not yet", http.StatusServiceUnavailable)
				return
			}
			w.Write(s.agent)
		})
		s.env["RAYVAST_PORT_A"] = h.port()
		s.env["RAYVAST_BOOT_TRIES"] = "5"
		r := run(t, sh.argv, s.env)
		if _, ok := agentRan(t, s.mark); r.code != 0 || !ok {
			t.Fatalf("exit %d, agent ran %v; stderr:\n%s", r.code, ok, r.stderr)
		}
		if got := strings.Count(r.stderr, "retry in"); got != 2 {
			t.Errorf("%d retries logged, want 2; stderr:\n%s", got, r.stderr)
		}
	})
}

// TestHeadNotUpYet: nothing listens on port A at first (the head's firewall
// is still closed); the bootloader keeps trying and succeeds once it opens.
// The server starts after the bootloader has logged two failed tries, so the
// test waits on events, not on a clock.
func TestHeadNotUpYet(t *testing.T) {
	py := pythons(t)[0]
	forEachShell(t, func(t *testing.T, sh shell) {
		t.Parallel()
		s := newSetup(t, py)
		// Outside the ephemeral range: the bootloader's own failed
		// connects (and the parallel subtests') cannot take it meanwhile.
		addr := rvtest.FreeAddr(t, "127.0.0.1")
		_, port, _ := net.SplitHostPort(addr)
		s.env["RAYVAST_PORT_A"] = port
		s.env["RAYVAST_BOOT_TRIES"] = "60"
		p := start(t, sh.argv, s.env)
		p.waitForLines(t, "retry in", 2)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			p.cmd.Process.Kill()
			p.wait(t)
			t.Fatalf("re-listen on %s (another process took the port?): %v", addr, err)
		}
		newHead(t, ln, serveBytes(s.agent))
		r := p.wait(t)
		if _, ok := agentRan(t, s.mark); r.code != 0 || !ok {
			t.Fatalf("exit %d, agent ran %v; stderr:\n%s", r.code, ok, r.stderr)
		}
	})
}

// TestStopWhileWaiting: SIGTERM during the retry wait ends the bootloader with
// 143 (its trap, which PID 1 needs) and removes its temp dir.
func TestStopWhileWaiting(t *testing.T) {
	py := pythons(t)[0]
	forEachShell(t, func(t *testing.T, sh shell) {
		s := newSetup(t, py)
		s.env["RAYVAST_PORT_A"] = "1" // nothing listens on port 1: refused at once
		s.env["RAYVAST_BOOT_TRIES"] = "60"
		p := start(t, sh.argv, s.env)
		p.waitForLines(t, "retry in", 1)
		p.cmd.Process.Signal(syscall.SIGTERM)
		r := p.wait(t)
		if r.code != 143 {
			t.Errorf("exit code %d, want 143; stderr:\n%s", r.code, r.stderr)
		}
		r.code = 1
		assertNothingRan(t, s, r)
	})
}

// TestNoPythonWithRay: when no candidate Python can import ray the bootloader
// says so, exits 1, and fetches nothing.
func TestNoPythonWithRay(t *testing.T) {
	py := pythons(t)[0]
	for _, c := range []string{"/usr/bin/python3", "/usr/bin/python", py, "/opt/conda/bin/python",
		"/usr/local/bin/python3", "/venv/bin/python", "/opt/venv/bin/python"} {
		if exec.Command(c, "-c", "import ray").Run() == nil {
			t.Skipf("SKIPPING: %s can import a real ray here; the case cannot be staged", c)
		}
	}
	forEachShell(t, func(t *testing.T, sh shell) {
		s := newSetup(t, py)
		delete(s.env, "PYTHONPATH")
		h := newHead(t, nil, serveBytes(s.agent))
		s.env["RAYVAST_PORT_A"] = h.port()
		r := run(t, sh.argv, s.env)
		assertNothingRan(t, s, r)
		if r.code != 1 || !strings.Contains(r.stderr, "no Python that can import ray") ||
			!strings.Contains(r.stderr, "RAYVAST_PYTHON") {
			t.Errorf("exit %d stderr %q, want 1 and a message naming RAYVAST_PYTHON", r.code, r.stderr)
		}
		if n := h.requests.Load(); n != 0 {
			t.Errorf("%d requests, want 0", n)
		}
	})
}

// TestBadEnv: each missing or malformed variable is refused with a message
// naming it, before any download.
func TestBadEnv(t *testing.T) {
	py := pythons(t)[0]
	upper := strings.ToUpper(sha([]byte(agentScript)))
	cases := []struct {
		name, key, value, want string // value "-" = unset
	}{
		{"no_head", "RAYVAST_HEAD", "-", "RAYVAST_HEAD"},
		{"empty_head", "RAYVAST_HEAD", "", "RAYVAST_HEAD"},
		{"no_port", "RAYVAST_PORT_A", "-", "RAYVAST_PORT_A"},
		{"port_not_number", "RAYVAST_PORT_A", "443x", "RAYVAST_PORT_A"},
		{"port_zero", "RAYVAST_PORT_A", "0", "RAYVAST_PORT_A"},
		{"port_too_big", "RAYVAST_PORT_A", "65536", "RAYVAST_PORT_A"},
		{"port_huge", "RAYVAST_PORT_A", "99999999999999999999999", "RAYVAST_PORT_A"},
		{"no_hash", "RAYVAST_BOOTSTRAP_SHA256", "-", "RAYVAST_BOOTSTRAP_SHA256"},
		{"uppercase_hash", "RAYVAST_BOOTSTRAP_SHA256", upper, "RAYVAST_BOOTSTRAP_SHA256"},
		{"short_hash", "RAYVAST_BOOTSTRAP_SHA256", upper[:63], "RAYVAST_BOOTSTRAP_SHA256"},
		{"long_hash", "RAYVAST_BOOTSTRAP_SHA256", sha(nil) + "0", "RAYVAST_BOOTSTRAP_SHA256"},
	}
	forEachShell(t, func(t *testing.T, sh shell) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := newSetup(t, py)
				h := newHead(t, nil, serveBytes(s.agent))
				s.env["RAYVAST_PORT_A"] = h.port()
				if c.value == "-" {
					delete(s.env, c.key)
				} else {
					s.env[c.key] = c.value
				}
				r := run(t, sh.argv, s.env)
				assertNothingRan(t, s, r)
				if !strings.Contains(r.stderr, c.want) {
					t.Errorf("stderr %q does not name %s", r.stderr, c.want)
				}
				if n := h.requests.Load(); n != 0 {
					t.Errorf("%d requests, want 0", n)
				}
			})
		}
	})
}

// TestIPv6Head: an IPv6 literal in RAYVAST_HEAD is bracketed in the URL.
func TestIPv6Head(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("SKIPPING: no IPv6 loopback here: %v", err)
	}
	py := pythons(t)[0]
	forEachShell(t, func(t *testing.T, sh shell) {
		s := newSetup(t, py)
		if ln == nil {
			if ln, err = net.Listen("tcp", "[::1]:0"); err != nil {
				t.Fatal(err)
			}
		}
		h := newHead(t, ln, serveBytes(s.agent))
		ln = nil
		s.env["RAYVAST_HEAD"] = "::1"
		s.env["RAYVAST_PORT_A"] = h.port()
		r := run(t, sh.argv, s.env)
		if _, ok := agentRan(t, s.mark); r.code != 0 || !ok {
			t.Fatalf("exit %d, agent ran %v; stderr:\n%s", r.code, ok, r.stderr)
		}
	})
}

// TestPID1: in a new PID namespace the shell is PID 1, and the agent it execs
// must be PID 1 too (exec, not a child).
func TestPID1(t *testing.T) {
	rvtest.NeedRoot(t, "unshare") // unshare --pid (util-linux)
	py := pythons(t)[0]
	forEachShell(t, func(t *testing.T, sh shell) {
		s := newSetup(t, py)
		h := newHead(t, nil, serveBytes(s.agent))
		s.env["RAYVAST_PORT_A"] = h.port()
		prefix := append([]string{"unshare", "--pid", "--fork", "--mount-proc"}, sh.argv...)
		r := run(t, prefix, s.env)
		got, ok := agentRan(t, s.mark)
		if r.code != 0 || !ok {
			t.Fatalf("exit %d, agent ran %v; stderr:\n%s", r.code, ok, r.stderr)
		}
		if got["pid"] != "1" {
			t.Errorf("agent PID = %s, want 1", got["pid"])
		}
	})
}

// TestNeverPrintsJoinToken: every run in this package checks its output for
// the token (proc.wait); this test alone covers a Python download error and a
// refusal, and proves the token still reaches the agent.
func TestNeverPrintsJoinToken(t *testing.T) {
	py := pythons(t)[0]
	forEachShell(t, func(t *testing.T, sh shell) {
		s := newSetup(t, py)
		h := newHead(t, nil, func(n int32, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				http.Error(w, "no", http.StatusForbidden)
				return
			}
			w.Write(s.agent)
		})
		s.env["RAYVAST_PORT_A"] = h.port()
		r := run(t, sh.argv, s.env) // wait() fails the test if the token shows
		got, ok := agentRan(t, s.mark)
		if r.code != 0 || !ok || got["token"] != joinToken {
			t.Fatalf("exit %d, agent ran %v with token %q, want the token passed on", r.code, ok, got["token"])
		}
		if !strings.Contains(r.stderr, "403") {
			t.Errorf("stderr %q lacks the head's 403", r.stderr)
		}

		s = newSetup(t, py)
		s.env["RAYVAST_PORT_A"] = h.port()
		s.env["RAYVAST_BOOTSTRAP_SHA256"] = sha([]byte("another agent"))
		assertNothingRan(t, s, run(t, sh.argv, s.env)) // the refusal path prints too
	})
}

// TestSizeBudget: the script without comments and blank lines must fit a
// rental's command field (docs/protocol.md §3: under 2 KiB).
func TestSizeBudget(t *testing.T) {
	f, err := os.Open(scriptPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		n += len(sc.Text()) + 1
	}
	t.Logf("bootloader.sh without comments and blank lines: %d bytes", n)
	if n >= 2048 {
		t.Errorf("bootloader.sh is %d bytes without comments, want < 2048", n)
	}
}
