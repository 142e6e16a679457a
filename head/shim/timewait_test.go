package shim

import (
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestNativeBindOverTimeWait: a port of the node's own left in TCP
// TIME_WAIT by a server that closed first (Ray 2.52's dashboard agent does
// this with its node's workers, issue 41) can still be bound by a process
// under the library that binds without SO_REUSEADDR, as Ray's raylet tests
// a worker port; without the library, or on a port that is not the node's,
// the same bind fails EADDRINUSE (the controls). A port with a listener
// still fails under the library: "in use" keeps its meaning.
func TestNativeBindOverTimeWait(t *testing.T) {
	lib, probe := buildNative(t, "native"), buildProbe(t)
	ports := rvtest.FreePorts(t, "127.0.0.1", 3)
	own, other, held := ports[0], ports[1], ports[2]
	serverClosesFirst(t, own)
	serverClosesFirst(t, other)
	rules := fmt.Sprintf("203.0.113.7 127.0.0.1 %d,%d", own, held)
	lib1 := []string{"LD_PRELOAD=" + lib, "NAT_SHIM=" + rules}
	p := func(n int) string { return fmt.Sprint(n) }

	runProbe(t, probe, nil, []string{"tcp4", "bindnr", "127.0.0.1", p(own)}, []string{"err EADDRINUSE"})
	runProbe(t, probe, lib1, []string{"tcp4", "bindnr", "127.0.0.1", p(own)}, []string{"ok 127.0.0.1:" + p(own) + " -:0"})
	runProbe(t, probe, lib1, []string{"tcp4", "bindnr", "203.0.113.7", p(own)}, []string{"ok 127.0.0.1:" + p(own) + " -:0"})
	runProbe(t, probe, lib1, []string{"tcp6", "bindnr", "::ffff:127.0.0.1", p(own)}, []string{"ok ::ffff:127.0.0.1:" + p(own) + " -:0"})
	runProbe(t, probe, lib1, []string{"tcp4", "bindnr", "127.0.0.1", p(other)}, []string{"err EADDRINUSE"})

	l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", held))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	runProbe(t, probe, lib1, []string{"tcp4", "bindnr", "127.0.0.1", p(held)}, []string{"err EADDRINUSE"})
}

// serverClosesFirst leaves 127.0.0.1:port in TIME_WAIT: the accepted side
// closes, the client reads the end and closes after it.
func serverClosesFirst(t *testing.T, port int) {
	t.Helper()
	l, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatal(err)
	}
	c.Close()
}
