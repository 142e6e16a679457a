package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestNodeWindow proves the operator's window into a node (`head logs`,
// `head node`) on a real cluster, in numbered steps:
//  1. a node created while the config has public_logs off: `head logs`
//     says how to switch logs on instead of a bare 401;
//  2. the head restarted with "public_logs": true: a new node serves its
//     logs; `head logs --ray` shows the stand-in Ray's output, and
//     `head logs --follow` shows a line Ray prints later within 2 s;
//  3. `head node` tells an enrolled node's story and a refused candidate's;
//  4. no token the head minted appears in what the commands printed.
func TestNodeWindow(t *testing.T) {
	c := newCluster(t, "docker")

	// 1.
	off := c.createCandidate(safeType)
	offID := c.waitRunning(off.CandidateID)
	out, code := c.headCmd("logs", "--state", c.state, offID)
	if code != 1 || !strings.Contains(out, `"public_logs": true`) || !strings.Contains(out, "RAYVAST_PUBLIC_LOGS=1") {
		t.Fatalf("head logs of a node with logs off: exit %d, output:\n%s\nwant exit 1 and how to switch logs on", code, out)
	}
	t.Logf("step 1: logs off says how to switch them on")

	// 2.
	c.stopHead()
	c.setConfig(func(cfg *wire.Config) { cfg.PublicLogs = true })
	c.startHead()
	on := c.createCandidate(safeType)
	bad := c.createCandidate(unsafeType)
	onID := c.waitRunning(on.CandidateID)
	waitFor(t, 30*time.Second, "Ray's log to show the stand-in", func() (bool, string) {
		out, code = c.headCmd("logs", "--state", c.state, "--ray", onID)
		return code == 0 && strings.Contains(out, "fakeray started"), fmt.Sprintf("exit %d: %s", code, out)
	})
	prefix := on.CandidateID[:len(on.CandidateID)-2] // a unique prefix names it too
	if out, code = c.headCmd("logs", "--state", c.state, "--tail", "3", prefix); code != 0 || strings.Count(out, "\n") > 3 || out == "" {
		t.Errorf("head logs --tail 3 %s (the agent's log): exit %d, %d lines:\n%s", prefix, code, strings.Count(out, "\n"), out)
	}
	c.followSeesNewLine(onID)
	t.Logf("step 2: logs on: Ray's output and --follow")

	// 3.
	waitFor(t, time.Minute, "the unsafe candidate to be refused", func() (bool, string) {
		cd := c.candidate(bad.CandidateID)
		return cd.State == wire.StateEnded, fmt.Sprintf("%+v", cd)
	})
	out, code = c.headCmd("node", "--state", c.state, onID)
	for _, want := range []string{"candidate", on.CandidateID, "node state", "enrolled", "last heartbeat", "ray", "running",
		"health", "host checks", "capabilities ok", "last lines of the agent's log"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("head node %s: exit %d, output lacks %q:\n%s", onID, code, want, out)
			break
		}
	}
	t.Logf("head node %s:\n%s", onID, out)
	out, code = c.headCmd("node", "--state", c.state, bad.CandidateID)
	if code != 0 || !strings.Contains(out, "ended") || !strings.Contains(out, "security") || !strings.Contains(out, "never enrolled") ||
		!strings.Contains(out, "by its agent at enrollment") || !strings.Contains(out, "FAILED") {
		t.Errorf("head node of the refused candidate: exit %d:\n%s\nwant its end, the security reason, 'never enrolled' and the failed check its agent reported", code, out)
	}
	if out, code = c.headCmd("node", "--state", c.state, "nosuchnode"); code != 1 || !strings.Contains(out, "no candidate or node matches") {
		t.Errorf("head node of an unknown name: exit %d: %s", code, out)
	}
	t.Logf("step 3: the stories of an enrolled and a refused node")

	// 4. The tokens are minted per call and never printed; a token is
	// three base64url parts, the first the constant EdDSA header.
	if strings.Contains(c.printed.String(), "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9") || strings.Contains(c.headLog.String(), "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9") {
		t.Errorf("a guest API token was printed or logged")
	}
}

// waitRunning waits for the candidate to enroll with Ray running and
// returns its instance ID.
func (c *cluster) waitRunning(candidateID string) string {
	c.t.Helper()
	var id string
	waitFor(c.t, 2*time.Minute, "candidate "+candidateID+" to enroll and run Ray", func() (bool, string) {
		cd := c.candidate(candidateID)
		n, ok := c.node(cd.InstanceID)
		id = cd.InstanceID
		return ok && n.Ray.State == wire.RayRunning, fmt.Sprintf("candidate %+v node %+v", cd, n)
	})
	return id
}

// headCmd runs a head command to its end and returns its output and code.
func (c *cluster) headCmd(args ...string) (string, int) {
	c.t.Helper()
	out, err := exec.Command(suite.head, args...).CombinedOutput()
	c.printed.Write(out)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("head %s: %v", args[0], err)
	}
	return string(out), code
}

// setConfig rewrites the config file head serve reads at its next start.
func (c *cluster) setConfig(edit func(*wire.Config)) {
	c.t.Helper()
	path := filepath.Join(c.dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	var cfg wire.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		c.t.Fatal(err)
	}
	edit(&cfg)
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// followSeesNewLine runs `head logs --follow --ray` and waits for a line
// the stand-in Ray prints after the command started (its ticks: the suite's
// image sets FAKERAY_TICK_S), within 2 s of a tick.
func (c *cluster) followSeesNewLine(id string) {
	c.t.Helper()
	cmd := exec.Command(suite.head, "logs", "--state", c.state, "--ray", "--follow", "--tail", "1", id)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); pw.Close() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			c.printed.Write([]byte(sc.Text() + "\n"))
			lines <- sc.Text()
		}
		close(lines)
	}()
	first := ""
	deadline := time.After(time.Duration(fakerayTickS)*time.Second + 2*time.Second + 2*time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				c.t.Fatalf("head logs --follow ended before a new line (first line %q)", first)
			}
			if first == "" {
				first = l
				continue
			}
			if strings.Contains(l, "fakeray tick") && l != first {
				return
			}
		case <-deadline:
			c.t.Fatalf("head logs --follow showed no new Ray line within a tick and 2 s (first line %q)", first)
		}
	}
}
