package shim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// guardNetns holds TestNativeGuard's addresses, all on the lo of a
// namespace of the test's own: the container's 198.18.40.1 and a
// co-tenant's 198.18.40.9 (a source that is neither loopback nor the
// container's: what a co-tenant on the host's bridge dials from).
const (
	guardSelf     = "198.18.40.1"
	guardCotenant = "198.18.40.9"
	guardNetnsEnv = "RVSHIM_GUARD_NETNS"
)

// TestNativeGuard proves the listener guard of the shim's native layer
// where it matters: a listener on a port outside the node's 64, opened
// under the library with the mesh on and WITHOUT CAP_NET_ADMIN (the kernel
// here refuses the socket filter then, as Docker's default capabilities
// make it on rentals, so the accept check alone holds), serves the
// container's own sources (127.0.0.1, its own address, ::1) with their
// true addresses, and resets the co-tenant's connection before the
// process sees it, for a blocking accept (torch's TCPStore), a
// non-blocking accept4 (Python, epoll servers) and a dual-stack IPv6
// listener. With the capability the filter drops the co-tenant's SYN.
// Controls: without the mesh, and on one of the node's own ports, the
// co-tenant is served (the path is there; the guard is what shuts it).
func TestNativeGuard(t *testing.T) {
	if os.Getenv(guardNetnsEnv) == "" {
		needRoot(t, "ip", "capsh")
		rerunInNetns(t, "TestNativeGuard", guardNetnsEnv, guardSelf, guardCotenant)
		return
	}
	lib, probe := os.Getenv("RVSHIM_TEST_LIB"), os.Getenv("RVSHIM_TEST_PROBE")
	own, other := freePort(t, "0.0.0.0"), freePort(t, "0.0.0.0")
	rules := fmt.Sprintf("203.0.113.7 %s %d", guardSelf, own)
	meshOn := []string{"LD_PRELOAD=" + lib, "NAT_SHIM=" + rules, "NAT_SHIM_MESH=127.0.0.1:9"}
	served := func(from string) string { return "hi " + from + ":*" }
	const shut = "shut"
	tests := []struct {
		name   string
		env    []string
		capNet bool // keep CAP_NET_ADMIN (the filter attaches)
		ops    []string
		dials  map[string]string // source ip → what it gets
	}{
		{"blocking accept, no CAP_NET_ADMIN: only the container is served", meshOn, false,
			[]string{"tcp4", "serve", "0.0.0.0", fmt.Sprint(other)},
			map[string]string{"127.0.0.1": served("127.0.0.1"), guardSelf: served(guardSelf), guardCotenant: shut}},
		{"non-blocking accept4, no CAP_NET_ADMIN: only the container is served", meshOn, false,
			[]string{"tcp4", "nbserve", "0.0.0.0", fmt.Sprint(other)},
			map[string]string{"127.0.0.1": served("127.0.0.1"), guardSelf: served(guardSelf), guardCotenant: shut}},
		{"dual-stack IPv6 listener, no CAP_NET_ADMIN: v4-mapped co-tenant shut", meshOn, false,
			[]string{"tcp6", "nbserve", "::", fmt.Sprint(other)},
			map[string]string{"::1": served("::1"), guardSelf: served("::ffff:" + guardSelf), guardCotenant: shut}},
		{"with CAP_NET_ADMIN the filter drops the co-tenant's SYN", meshOn, true,
			[]string{"tcp4", "serve", "0.0.0.0", fmt.Sprint(other)},
			map[string]string{guardSelf: served(guardSelf), guardCotenant: "no answer"}},
		{"control: without the mesh the co-tenant is served", []string{"LD_PRELOAD=" + lib, "NAT_SHIM=" + rules}, false,
			[]string{"tcp4", "serve", "0.0.0.0", fmt.Sprint(other)},
			map[string]string{guardCotenant: served(guardCotenant)}},
		{"control: the node's own ports stay open to all", meshOn, false,
			[]string{"tcp4", "nbserve", "0.0.0.0", fmt.Sprint(own)},
			map[string]string{guardCotenant: served(guardCotenant)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv := []string{"--drop=cap_net_admin", "--", "-c", `exec "$0" "$@"`, probe}
			if tt.capNet {
				argv = []string{"--", "-c", `exec "$0" "$@"`, probe}
			}
			cmd := exec.Command("capsh", append(argv, tt.ops...)...)
			cmd.Env = tt.env
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			lines := bufio.NewScanner(stdout)
			if !lines.Scan() || !strings.HasPrefix(lines.Text(), "0 ok") {
				t.Fatalf("the probe did not listen: %q", lines.Text())
			}
			port := tt.ops[3]
			for from, want := range tt.dials {
				if got := guardDial(from, port); !matchProbe(got, want) && got != want {
					t.Errorf("from %s: %q, want %q", from, got, want)
				} else {
					t.Logf("from %s: %s", from, got)
				}
			}
		})
	}
}

// guardDial connects from source ip to the namespace's listener at port
// (IPv6 sources dial ::1's listener, IPv4 ones the container's address)
// and says what it got: the server's line, "shut" when the connection
// was reset or closed unread, "no answer" when the SYN went unanswered.
func guardDial(from, port string) string {
	to := guardSelf
	if strings.Contains(from, ":") {
		to = "::1"
	}
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", net.JoinHostPort(to, port))
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return "no answer"
		}
		if errors.Is(err, syscall.ECONNRESET) { // reset before the dialer looked
			return "shut"
		}
		return "dial: " + err.Error()
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	switch {
	case err == nil:
		return strings.TrimSpace(line)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF):
		return "shut"
	default:
		return "read: " + err.Error()
	}
}
