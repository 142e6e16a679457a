package portcheck

import (
	"net"
	"strconv"
	"sync"
	"testing"
)

// testKey is distinctive so tests can grep errors and logs for it.
var testKey = []byte("portcheck-test-key-0123456789abc")

// listenAgent runs the real agent side on ports and closes it at cleanup.
func listenAgent(t testing.TB, host string, ports []int, key []byte) *Listeners {
	t.Helper()
	l, err := Listen(host, ports, key, nil)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// fakePort serves port on host with handle instead of the real agent: the
// misbehaving peers of the failure tests.
func fakePort(t testing.TB, host string, port int, handle func(c net.Conn, port int)) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("fake listener on port %d: %v", port, err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); handle(c, port) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// readChallenge reads the head's challenge the way the agent does.
func readChallenge(c net.Conn) (string, bool) {
	line, err := readLine(c, maxChallengeRead)
	if err != nil {
		return "", false
	}
	return parseChallenge(line)
}

// without returns ports minus the one at index i.
func without(ports []int, i int) []int {
	out := append([]int(nil), ports[:i]...)
	return append(out, ports[i+1:]...)
}
