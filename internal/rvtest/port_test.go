package rvtest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePorts proves the ports are distinct, outside the kernel's ephemeral
// range (so no outgoing connection can take one as its source port), and
// free: each accepts a listener right after FreePorts returns.
func TestFreePorts(t *testing.T) {
	elo, ehi := ephemeral()
	lo, hi := window()
	outside := hi < elo || lo > ehi
	if !outside {
		t.Logf("the ephemeral range %d-%d leaves no span of 1024 ports outside it: ports come from inside", elo, ehi)
	}
	ports := FreePorts(t, "127.0.0.1", 64)
	if len(ports) != 64 {
		t.Fatalf("got %d ports, want 64", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d twice", p)
		}
		seen[p] = true
		if outside && p >= elo && p <= ehi {
			t.Errorf("port %d lies in the ephemeral range %d-%d", p, elo, ehi)
		}
		if p < lowest {
			t.Errorf("port %d is below %d", p, lowest)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d not free: %v", p, err)
			continue
		}
		l.Close()
	}
}

// TestFreePortsSkipsTakenPorts: a port someone holds is never handed out.
func TestFreePortsSkipsTakenPorts(t *testing.T) {
	lo, hi := window()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	taken := map[int]bool{}
	for p := lo; p <= hi && len(held) < 200; p += (hi - lo) / 200 {
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		held = append(held, l)
		taken[p] = true
	}
	for range 50 {
		for _, p := range FreePorts(t, "", 16) {
			if taken[p] {
				t.Fatalf("FreePorts handed out port %d, which a listener holds", p)
			}
		}
	}
}
