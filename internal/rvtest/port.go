// Free ports: TCP ports that are free now and that the kernel will not give
// to anyone else before the code under test binds them.
//
// The usual trick (listen on port 0, note the port, close, let the code
// under test bind it) races: port 0 and every outgoing connect() draw from
// the ephemeral range (net.ipv4.ip_local_port_range), so a connection made
// by the test itself, a parallel subtest or another package can take the
// freed port as its source port in between, and the bind fails with
// "address already in use". Ports below the ephemeral range are only ever
// taken by someone who names them, so these are picked from there, at
// random (two test processes rarely pick the same), and each is checked.

package rvtest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowest is the first port handed out: below it live well-known services.
const lowest = 10000

// rangeFile is where Linux keeps the ephemeral range.
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// FreePorts returns n distinct ports that all accept a listener on host
// ("" = every address) right now and lie outside the ephemeral range.
// They are released before it returns; the caller binds them next.
func FreePorts(t testing.TB, host string, n int) []int {
	t.Helper()
	lo, hi := window()
	if hi-lo < 4*n {
		t.Fatalf("rvtest: only ports %d-%d lie outside the ephemeral range, need %d", lo, hi, n)
	}
	var (
		held  []net.Listener
		ports []int
	)
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	span := hi - lo + 1
	start := rand.IntN(span)
	for i := 0; i < span && len(ports) < n; i++ {
		p := lo + (start+i)%span
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			continue // someone named this port; try the next
		}
		held = append(held, l)
		ports = append(ports, p)
	}
	if len(ports) < n {
		t.Fatalf("rvtest: found %d free ports on %q in %d-%d, need %d", len(ports), host, lo, hi, n)
	}
	return ports
}

// FreePort returns a single port like FreePorts.
func FreePort(t testing.TB, host string) int {
	t.Helper()
	return FreePorts(t, host, 1)[0]
}

// FreeAddr returns host:port for a single port like FreePorts.
func FreeAddr(t testing.TB, host string) string {
	t.Helper()
	return net.JoinHostPort(host, strconv.Itoa(FreePort(t, host)))
}

// window is the span of ports below the ephemeral range, or above it when
// the range starts too low to leave room. A machine whose ephemeral range
// covers nearly everything leaves no such span: then the ports above
// lowest are all there is, and the race this package avoids is back.
func window() (lo, hi int) {
	elo, ehi := ephemeral()
	switch {
	case elo-1-lowest >= 1024:
		return lowest, elo - 1
	case 65535-ehi >= 1024:
		return ehi + 1, 65535
	}
	return lowest, 65535
}

// ephemeral reads the kernel's ephemeral range; Linux's default when it
// cannot.
func ephemeral() (lo, hi int) {
	b, err := os.ReadFile(rangeFile)
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && 0 < l && l <= h && h <= 65535 {
				return l, h
			}
		}
	}
	return 32768, 60999
}
