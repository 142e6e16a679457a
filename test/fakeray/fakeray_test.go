package fakeray_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/test/fakeray"
)

func TestMain(m *testing.M) {
	if err := fakeray.BuildNatives(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

type (
	record = fakeray.Record
)

// fake is one running fakeray with its stdout read line by line.
type fake struct {
	cmd   *exec.Cmd
	lines chan string
	rec   string
}

func python(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 not found: fakeray needs it: %v", err)
	}
	return p
}

// run starts fakeray as the agent does (docs/protocol.md §9): python -m
// ray.scripts.scripts ARGS, this dir on PYTHONPATH (after shimDir when
// given), env exactly PATH, PYTHONPATH, FAKERAY_RECORD and extra. wrap, if
// any, is prepended to the command (unshare for a netns).
func run(t testing.TB, shimDir string, extra []string, wrap []string, args ...string) *fake {
	t.Helper()
	pp := fakeray.Dir()
	if shimDir != "" {
		pp = shimDir + ":" + pp
	}
	f := &fake{rec: filepath.Join(t.TempDir(), "record.json"), lines: make(chan string, 100)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard only
	argv := append(append(slices.Clone(wrap), python(t), "-m", "ray.scripts.scripts"), args...)
	f.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	f.cmd.Dir = t.TempDir()
	f.cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + t.TempDir(), "PYTHONPATH=" + pp, "FAKERAY_RECORD=" + f.rec}, extra...)
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f.cmd.Stderr = os.Stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := f.cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL); cancel() })
	go func() {
		defer close(f.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	return f
}

func (f *fake) expect(t testing.TB, want string) {
	t.Helper()
	for l := range f.lines {
		if l == want {
			return
		}
	}
	t.Fatalf("fakeray's stdout ended before %q (record: %+v)", want, f.record(t))
}

// wait returns the exit code (-1 when killed by a signal).
func (f *fake) wait(t testing.TB) int {
	t.Helper()
	for range f.lines {
	}
	err := f.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return f.cmd.ProcessState.ExitCode()
}

func (f *fake) record(t testing.TB) record {
	t.Helper()
	r, err := fakeray.ReadRecord(f.rec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ports returns n distinct ports free on this machine now, below the
// kernel's ephemeral range (32768+): a port from bind(:0) can be taken
// again at once by any outgoing connection on this shared machine, and the
// raylet's later bind would then fail with EADDRINUSE.
func ports(t testing.TB, n int) []int {
	t.Helper()
	var ps []int
	for tries := 0; len(ps) < n; tries++ {
		if tries > 1000 {
			t.Fatal("no free ports in 20000-32767")
		}
		p := 20000 + rand.IntN(12768)
		if slices.Contains(ps, p) {
			continue
		}
		l, err := net.Listen("tcp", "0.0.0.0:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		ps = append(ps, p)
	}
	return ps
}

// node is a worker's command line as docs/protocol.md §9 gives it.
type node struct {
	ip                                  string
	nm, om, rea, dagrpc, dahttp, metric int
	workers                             []int
	cpus                                int
	temp                                string
	extra                               []string // more flags
}

func newNode(t testing.TB, ip string, workers int) node {
	p := ports(t, 6+workers)
	temp, err := os.MkdirTemp("", "fr") // short: Ray's AF_UNIX sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(temp) })
	return node{ip: ip, nm: p[0], om: p[1], rea: p[2], dagrpc: p[3], dahttp: p[4], metric: p[5], workers: p[6:], cpus: workers - 1, temp: temp}
}

func (n node) args() []string {
	ws := make([]string, len(n.workers))
	for i, w := range n.workers {
		ws[i] = fmt.Sprint(w)
	}
	a := []string{"start", "--block", "--address=10.0.0.1:6379", "--node-ip-address=" + n.ip,
		fmt.Sprintf("--node-manager-port=%d", n.nm), fmt.Sprintf("--object-manager-port=%d", n.om),
		fmt.Sprintf("--runtime-env-agent-port=%d", n.rea), fmt.Sprintf("--dashboard-agent-grpc-port=%d", n.dagrpc),
		fmt.Sprintf("--dashboard-agent-listen-port=%d", n.dahttp), fmt.Sprintf("--metrics-export-port=%d", n.metric),
		"--worker-port-list=" + strings.Join(ws, ","), "--num-gpus=1", fmt.Sprintf("--num-cpus=%d", n.cpus),
		"--temp-dir=" + n.temp, "--node-name=c-123", `--resources={"vast":1}`, `--labels={"zone":"a"}`}
	return append(a, n.extra...)
}

// secrets writes the TLS files and token file docs/protocol.md §9 gives Ray and
// returns the env naming them.
func secrets(t testing.TB) []string {
	t.Helper()
	d := t.TempDir()
	files := map[string]string{
		"node.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
		"node.key": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
		"ca.crt":   "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n",
		"token":    "s3cr3t-token-value\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"RAY_USE_TLS=1", "RAY_TLS_SERVER_CERT=" + filepath.Join(d, "node.crt"),
		"RAY_TLS_SERVER_KEY=" + filepath.Join(d, "node.key"), "RAY_TLS_CA_CERT=" + filepath.Join(d, "ca.crt"),
		"RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN_PATH=" + filepath.Join(d, "token")}
}

// gone waits until no process has pid.
func gone(t testing.TB, what string, pid int) {
	t.Helper()
	if !rvtest.Until(5*time.Second, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(b), ") Z ")
	}) {
		t.Errorf("%s (pid %d) still running", what, pid)
	}
}

func needRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		rvtest.Need(t, "needs root: "+why)
	}
}
