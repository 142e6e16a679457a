//go:build linux

package supervise

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testDeadline bounds every wait in a test: a broken supervisor fails, it
// does not hang the run.
const testDeadline = 15 * time.Second

func TestMain(m *testing.M) {
	if h := os.Getenv(envHelper); h != "" {
		os.Exit(runHelper(h))
	}
	os.Exit(m.Run())
}

// helperRun is a re-executed test binary playing the supervisor (the agent),
// seen from the test: its report lines, its stdin, its exit.
type helperRun struct {
	t       *testing.T
	cmd     *exec.Cmd
	lines   chan string
	backlog []string
	stdin   *os.File
	exited  chan struct{}
}

// startHelper runs scenario (with env) as a child of the test, under wrap
// (e.g. unshare) when given. Stdio are files, so cmd.Wait never waits on a
// pipe an orphan still holds.
func startHelper(t *testing.T, scenario string, wrap []string, env ...string) *helperRun {
	t.Helper()
	repR, repW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "stderr")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, wrap...), os.Args[0])
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), envHelper+"="+scenario), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, logFile, logFile
	cmd.ExtraFiles = []*os.File{repW}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	repW.Close()
	inR.Close()
	logFile.Close()
	r := &helperRun{t: t, cmd: cmd, lines: make(chan string, 64), stdin: inW, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(repR)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	go func() {
		cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			cmd.Process.Kill() // its children follow by Pdeathsig (or unshare --kill-child)
			<-r.exited
		}
		repR.Close()
		inW.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("helper stderr:\n%s", b)
		}
	})
	return r
}

// startSupervisor runs the supervisor scenario around the child scenario.
func startSupervisor(t *testing.T, child string, grace time.Duration, wrap []string, env ...string) *helperRun {
	t.Helper()
	env = append(env, envChild+"="+child, envGrace+"="+grace.String())
	return startHelper(t, "supervisor", wrap, env...)
}

// expect returns the first report line starting with prefix, in any order
// relative to other lines (which stay for later expects).
func (r *helperRun) expect(prefix string) string {
	r.t.Helper()
	for i, l := range r.backlog {
		if strings.HasPrefix(l, prefix) {
			r.backlog = append(r.backlog[:i], r.backlog[i+1:]...)
			return l
		}
	}
	deadline := time.NewTimer(testDeadline)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("report pipe closed before a line %q; unmatched lines: %q", prefix, r.backlog)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
			r.backlog = append(r.backlog, l)
		case <-deadline.C:
			r.t.Fatalf("no report line %q within %v; unmatched lines: %q", prefix, testDeadline, r.backlog)
		}
	}
}

// wait returns the helper's exit code; a death by signal fails the test.
func (r *helperRun) wait() int {
	r.t.Helper()
	select {
	case <-r.exited:
	case <-time.After(testDeadline):
		r.t.Fatalf("helper did not exit within %v; unmatched lines: %q", testDeadline, r.backlog)
	}
	ws := r.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Exited() {
		r.t.Fatalf("helper did not exit normally: %v", r.cmd.ProcessState)
	}
	return ws.ExitStatus()
}

func (r *helperRun) signal(pid int, sig syscall.Signal) {
	r.t.Helper()
	if err := unix.Kill(pid, sig); err != nil {
		r.t.Fatalf("kill %d %v: %v", pid, sig, err)
	}
}

// field returns the value of key=value in a report line.
func field(t *testing.T, line, key string) int {
	t.Helper()
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("line %q: %s=%q not a number", line, key, v)
			}
			return n
		}
	}
	t.Fatalf("line %q has no %s=", line, key)
	return 0
}

func readProcs(t *testing.T) []procStat {
	t.Helper()
	procs, err := scanProcs()
	if err != nil {
		t.Fatal(err)
	}
	return procs
}

// zombiesOf lists the zombie children of ppid.
func zombiesOf(t *testing.T, ppid int) []string {
	var z []string
	for _, p := range readProcs(t) {
		if p.ppid == ppid && p.state == "Z" {
			z = append(z, fmt.Sprint(p.pid))
		}
	}
	return z
}

// childOf finds the one child of ppid (the supervisor inside unshare).
func childOf(t *testing.T, ppid int) int {
	t.Helper()
	for _, p := range readProcs(t) {
		if p.ppid == ppid {
			return p.pid
		}
	}
	t.Fatalf("process %d has no child", ppid)
	return 0
}

// gone tells whether pid has left /proc (exited and reaped).
func gone(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return os.IsNotExist(err)
}
