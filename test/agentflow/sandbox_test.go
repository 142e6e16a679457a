package agentflow

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// vethNet is a network namespace joined to the host by a veth pair: the
// head listens on HostIP, the candidate's public IP is NodeIP (its eth0).
type vethNet struct {
	NS, HostIf     string
	HostIP, NodeIP string
}

// newVethNet makes the namespace and pair in a random /30 of 10.250.0.0/16
// (a private range only this test uses) and removes them at cleanup.
func newVethNet(t *testing.T) *vethNet {
	t.Helper()
	id := randHex(3)
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<14))
	base := int(n.Int64()) * 4
	v := &vethNet{NS: "rvaf" + id, HostIf: "rvaf" + id,
		HostIP: fmt.Sprintf("10.250.%d.%d", base/256, base%256+1), NodeIP: fmt.Sprintf("10.250.%d.%d", base/256, base%256+2)}
	run(t, "ip", "netns", "add", v.NS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", v.NS).Run() })
	// The candidate's side is called eth0, as in a container: host-side
	// names like veth* are what the netns check reads as host plumbing.
	run(t, "ip", "link", "add", v.HostIf, "type", "veth", "peer", "name", "eth0", "netns", v.NS)
	t.Cleanup(func() { exec.Command("ip", "link", "del", v.HostIf).Run() })
	run(t, "ip", "addr", "add", v.HostIP+"/30", "dev", v.HostIf)
	run(t, "ip", "link", "set", v.HostIf, "up")
	run(t, "ip", "-n", v.NS, "addr", "add", v.NodeIP+"/30", "dev", "eth0")
	run(t, "ip", "-n", v.NS, "link", "set", "eth0", "up")
	run(t, "ip", "-n", v.NS, "link", "set", "lo", "up")
	run(t, "ip", "-n", v.NS, "route", "add", "default", "via", v.HostIP)
	return v
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort returns a port free on ip right now (the head binds it next),
// from outside the ephemeral range so no connection takes it meanwhile.
func freePort(t *testing.T, ip string) int {
	t.Helper()
	return rvtest.FreePort(t, ip)
}

// procStatus returns one field of /proc/PID/status ("NSpid", "VmRSS").
func procStatus(pid int, field string) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// children lists the host PIDs of pid's children, forked by any of its
// threads (the agent's supervisor forks Ray from a locked OS thread).
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// environ reads /proc/PID/environ.
func environ(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("read environ of %d: %v", pid, err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
