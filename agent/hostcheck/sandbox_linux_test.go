package hostcheck

// Root-only tests: each runs a check in a child process (this test binary
// re-run, the os/exec pattern) inside a real sandbox made by unshare or
// capsh, and compares it with a child in the test's own namespaces.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

const (
	childEnv    = "HOSTCHECK_SANDBOX_CHILD"
	childMarker = "HOSTCHECK-RESULT "
)

// childResult is what a sandbox child reports.
type childResult struct {
	Check  wire.Check
	NetIno uint64 // inode of the child's netns
}

// TestSandboxChild is not a test: it is the child body, run only when the
// parent sets childEnv to the check to run.
func TestSandboxChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		return
	}
	cfg := Config{Root: "/"}.withDefaults()
	var res childResult
	res.NetIno, _ = readNsInode("/proc/self/ns/net", "net")
	switch mode {
	case "netns":
		res.Check = checkNetns(cfg)
	case "shm":
		res.Check = checkShm(cfg)
	case "shm-write":
		if err := os.WriteFile("/dev/shm/rayvast-test", []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		res.Check = checkShm(cfg)
	case "capabilities":
		res.Check = checkCapabilities(cfg)
	default:
		t.Fatalf("unknown child mode %q", mode)
	}
	b, _ := json.Marshal(res)
	fmt.Printf("\n%s%s\n", childMarker, b)
}

// runChild runs the child body for mode under the argv prefix (e.g.
// "unshare", "-n"); a prefix ending in a shell script gets the test binary
// as $0. It returns what the child reported.
func runChild(t *testing.T, mode string, prefix ...string) childResult {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{}, prefix...), self, "-test.run=^TestSandboxChild$", "-test.count=1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child %q: %v\nstdout: %s\nstderr: %s", args, err, out.String(), stderr.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), childMarker); ok {
			var res childResult
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				t.Fatal(err)
			}
			t.Logf("child %s under %q: %+v", mode, prefix, res)
			return res
		}
	}
	t.Fatalf("child %q printed no result:\n%s\n%s", args, out.String(), stderr.String())
	return childResult{}
}

// shScript is a prefix that runs script in sh, then execs the test binary.
func shScript(script string) []string {
	return []string{"sh", "-c", script + ` && exec "$0" "$@"`}
}

// TestSandboxNetns: a child in a fresh netns (unshare -n) is in another
// netns than the test and passes; a child in the test's own netns fails
// when that netns is provably the initial one (this machine may itself be
// a container, in which case its netns is not "the host's").
func TestSandboxNetns(t *testing.T) {
	rvtest.NeedRoot(t, "unshare")
	parent, err := readNsInode("/proc/self/ns/net", "net")
	if err != nil {
		t.Fatal(err)
	}
	fresh := runChild(t, "netns", "unshare", "-n", "-m")
	if fresh.NetIno == 0 || fresh.NetIno == parent {
		t.Errorf("fresh netns inode got %d, want one other than the test's %d", fresh.NetIno, parent)
	}
	if !fresh.Check.OK || !strings.Contains(fresh.Check.Detail, fmt.Sprint(fresh.NetIno)) {
		t.Errorf("fresh netns: got %+v, want ok naming inode %d", fresh.Check, fresh.NetIno)
	}

	same := runChild(t, "netns")
	if same.NetIno != parent {
		t.Errorf("child without unshare: inode got %d, want the test's %d", same.NetIno, parent)
	}
	if parent == netInitIno {
		if same.Check.OK {
			t.Errorf("child in the initial netns passed: %+v", same.Check)
		}
	} else {
		t.Logf("the test's netns %d is not provably the initial one (a container?); check says %+v", parent, same.Check)
	}
}

// TestSandboxNetnsInterfaces: a fresh netns holding a bridge named docker0
// proves the interface signal reads the live /proc/net/dev; on a kernel
// that fixes the initial inode the inode proof still passes it.
func TestSandboxNetnsInterfaces(t *testing.T) {
	rvtest.NeedRoot(t, "unshare", "ip")
	prefix := append([]string{"unshare", "-n", "-m"}, shScript("ip link add docker0 type bridge")...)
	res := runChild(t, "netns", prefix...)
	if !strings.Contains(res.Check.Detail, "container plumbing docker0") {
		t.Errorf("got %+v, want the detail to name docker0 as container plumbing", res.Check)
	}
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if kernelFixesNetInitIno(string(rel)) && !res.Check.OK {
		t.Errorf("kernel %s fixes the initial inode and the child's differs, but it failed: %+v", bytes.TrimSpace(rel), res.Check)
	}
}

// TestSandboxShm: a private empty tmpfs on /dev/shm passes; one file fails.
func TestSandboxShm(t *testing.T) {
	rvtest.NeedRoot(t, "unshare", "mount")
	prefix := append([]string{"unshare", "-m"}, shScript("mount -t tmpfs -o size=1m,mode=1777 rayvast-shm /dev/shm")...)
	if res := runChild(t, "shm", prefix...); !res.Check.OK {
		t.Errorf("empty private /dev/shm: got %+v, want ok", res.Check)
	}
	res := runChild(t, "shm-write", prefix...)
	if res.Check.OK || !strings.Contains(res.Check.Detail, "rayvast-test") {
		t.Errorf("/dev/shm with a file: got %+v, want a failure naming rayvast-test", res.Check)
	}
	if _, err := os.Stat("/dev/shm/rayvast-test"); err == nil {
		t.Errorf("the child's file leaked out of its mount namespace into the real /dev/shm")
	}
}

// TestSandboxCapabilities: capsh dropping both from the bounding set before
// exec (so root's exec leaves them out of permitted and effective too)
// passes with both sources; dropping one fails naming only the other; the
// test's own full root fails.
func TestSandboxCapabilities(t *testing.T) {
	rvtest.NeedRoot(t, "capsh", "bash")
	dropped := runChild(t, "capabilities", "capsh", "--drop=cap_net_raw,cap_net_admin", "--", "-c", `exec "$0" "$@"`)
	if !dropped.Check.OK || !strings.Contains(dropped.Check.Detail, "(status+capget)") {
		t.Errorf("both dropped: got %+v, want ok from status and capget", dropped.Check)
	}
	half := runChild(t, "capabilities", "capsh", "--drop=cap_net_raw", "--", "-c", `exec "$0" "$@"`)
	if half.Check.OK || strings.Contains(half.Check.Detail, "NET_RAW") || !strings.Contains(half.Check.Detail, "NET_ADMIN in effective,permitted,bounding") {
		t.Errorf("NET_RAW dropped: got %+v, want a failure naming only NET_ADMIN", half.Check)
	}

	own, err := readCapStatus("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if len(own.held()) == 0 {
		rvtest.Need(t, "the test holds neither capability, so full root cannot be shown failing")
	}
	full := runChild(t, "capabilities")
	if full.Check.OK || full.Check.Detail != strings.Join(own.held(), "; ") {
		t.Errorf("full root: got %+v, want a failure %q", full.Check, strings.Join(own.held(), "; "))
	}
}
