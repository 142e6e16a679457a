package agentflow

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/whoami"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/test/fakeray"
)

// Binaries are built once per test run, the way build.sh builds them.
var (
	buildOnce          sync.Once
	headBin, agentBin  string
	buildErr, buildDir = error(nil), ""
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func binaries(t *testing.T) (head, agent string) {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "agentflow-bin"); buildErr != nil {
			return
		}
		if headBin, buildErr = rvtest.BuildErr(buildDir, "./head"); buildErr == nil {
			agentBin, buildErr = rvtest.BuildErr(buildDir, "./agent")
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return headBin, agentBin
}

// flow is one candidate's world: a veth netns, a who-am-I resolver, a
// head, a candidate created over the admin API, and (after start) the
// sandboxed bootloader → agent → fakeray chain.
type flow struct {
	t                 *testing.T
	repo, tmp, python string
	vn                *vethNet
	dns               *whoami.Server
	head              *head
	created           wire.CandidateCreated
	secrets           map[string]string // name → value that must never leak
	state, record     string
	env               []string
	cmd               *exec.Cmd
	out               *rvtest.Buffer
	exited            chan error
	started           time.Time
	exitErr           error
	exitSeen          bool
}

// newFlow does steps 1-3: network, head, candidate and its env.
func newFlow(t *testing.T) *flow {
	rvtest.NeedRoot(t, "ip", "unshare", "capsh", "python3", "sh")
	hb, ab := binaries(t)
	if err := fakeray.BuildNatives(); err != nil { // the stand-in's native raylet and core worker
		t.Fatal(err)
	}
	f := &flow{t: t, repo: rvtest.ModuleRoot(t), tmp: t.TempDir(), python: realPython(t), out: &rvtest.Buffer{}}

	// 1. Network: the candidate's own netns, the head and the who-am-I
	// resolver on the host side of a veth pair.
	f.vn = newVethNet(t)
	dns, err := whoami.Start(net.JoinHostPort(f.vn.HostIP, "0"), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	f.dns = dns

	// 2. The head: init, config with a 1 s heartbeat, serve.
	f.head = startHead(t, hb, ab, f.tmp, f.vn.HostIP)

	// 3. A candidate over the admin API, its env as a provider would rent it.
	f.created = f.head.createCandidate(t, f.vn.NodeIP)
	f.secrets = f.head.secrets(t)
	f.secrets["join token"] = f.created.JoinToken
	f.secrets["CONTAINER_API_KEY"] = containerAPIKey
	f.state = filepath.Join(f.tmp, "node-state")
	f.record = filepath.Join(f.tmp, "fakeray.json")
	f.env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "TMPDIR=" + f.tmp,
		"RAYVAST_PORTS=" + portList(41000),
		"RAYVAST_PYTHON=" + f.python,
		"RAYVAST_STATE=" + f.state,
		"RAYVAST_EGRESS_RESOLVERS=" + fmt.Sprintf("opendns@%s,cloudflare@%s,google@%s", dns.Addr(), dns.Addr(), dns.Addr()),
		"RAYVAST_BOOT_TRIES=5", "RAYVAST_BOOT_MAXWAIT=2",
		"PYTHONPATH=" + filepath.Join(f.repo, "test", "fakeray"),
		"FAKERAY_RECORD=" + f.record,
		"FAKERAY_EXIT_CODE=" + strconv.Itoa(rayExitCode),
		"FAKERAY_IMPORT=sitecustomize",
		"CONTAINER_API_KEY=" + containerAPIKey,
		"E2E_PLAIN=kept",                           // an ordinary variable: reaches Ray
		"E2E_COPY_OF_TOKEN=" + f.created.JoinToken, // a secret under another name: must not
	}
	for k, v := range f.created.Env {
		f.env = append(f.env, k+"="+v)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent output:\n%s", f.out.String())
			t.Logf("head output:\n%s", f.head.stderr.String())
		}
	})
	return f
}

// setEnv replaces or adds one variable of the candidate's env.
func (f *flow) setEnv(name, value string) {
	for i, kv := range f.env {
		if len(kv) > len(name) && kv[:len(name)+1] == name+"=" {
			f.env[i] = name + "=" + value
			return
		}
	}
	f.env = append(f.env, name+"="+value)
}

// start is step 4: bootloader.sh as PID 1 of a new PID namespace, in the
// netns, with a private empty /dev/shm and no NET_RAW/NET_ADMIN.
func (f *flow) start() {
	t := f.t
	script := `mount -t tmpfs -o size=1m,mode=1777 tmpfs /dev/shm && exec capsh --drop=cap_net_raw,cap_net_admin -- -c 'exec sh "$0"' "$1"`
	f.cmd = exec.Command("ip", "netns", "exec", f.vn.NS, "unshare", "--pid", "--fork", "--mount-proc", "--",
		"sh", "-c", script, "sh", filepath.Join(f.repo, "bootloader.sh"))
	f.cmd.Env = f.env
	f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
	f.started = time.Now()
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.exited = make(chan error, 1)
	go func() { f.exited <- f.cmd.Wait() }()
	t.Cleanup(func() {
		if f.exitSeen {
			return
		}
		// unshare's child is the namespace's PID 1: killing it ends the namespace.
		for _, c := range children(f.cmd.Process.Pid) {
			syscall.Kill(c, syscall.SIGKILL)
		}
		f.cmd.Process.Kill()
		<-f.exited
	})
}

// wait returns the sandbox's exit code (the agent's: every layer execs or
// passes it on), failing the test after limit.
func (f *flow) wait(limit time.Duration) int {
	f.t.Helper()
	select {
	case err := <-f.exited:
		f.exitSeen, f.exitErr = true, err
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			f.t.Fatalf("sandbox: %v", err)
		}
		return 0
	case <-time.After(limit):
		f.t.Fatalf("the agent did not exit within %v", limit)
		return -1
	}
}

// agentPID is the agent's host PID: the only child of unshare.
func (f *flow) agentPID() int { return onlyChild(f.t, f.cmd.Process.Pid) }
