package firewall

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/rayvast/rayvast/internal/rvtest"
)

var nsSeq atomic.Int64

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// lab is two network namespaces the test creates, joined by a veth pair:
// "srv" (the head: 10.231.0.1, fd31::1) and "cli" (candidates and strangers:
// 10.231.0.2 and .3, fd31::2 and ::3).
type lab struct{ srv, cli string }

func newLab(t *testing.T) lab {
	t.Helper()
	id := strconv.Itoa(os.Getpid()%100000) + "-" + strconv.FormatInt(nsSeq.Add(1), 10)
	l := lab{srv: "rvfw-s" + id, cli: "rvfw-c" + id}
	run(t, "ip", "netns", "add", l.srv)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.srv).Run() })
	run(t, "ip", "netns", "add", l.cli)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.cli).Run() })
	run(t, "ip", "-n", l.srv, "link", "add", "vs", "type", "veth", "peer", "name", "vc", "netns", l.cli)
	for _, c := range [][]string{
		{"ip", "-n", l.srv, "addr", "add", "10.231.0.1/24", "dev", "vs"},
		{"ip", "-n", l.srv, "addr", "add", "fd31::1/64", "dev", "vs", "nodad"},
		{"ip", "-n", l.cli, "addr", "add", "10.231.0.2/24", "dev", "vc"},
		{"ip", "-n", l.cli, "addr", "add", "10.231.0.3/24", "dev", "vc"},
		{"ip", "-n", l.cli, "addr", "add", "fd31::2/64", "dev", "vc", "nodad"},
		{"ip", "-n", l.cli, "addr", "add", "fd31::3/64", "dev", "vc", "nodad"},
		{"ip", "-n", l.srv, "link", "set", "vs", "up"},
		{"ip", "-n", l.cli, "link", "set", "vc", "up"},
		{"ip", "-n", l.srv, "link", "set", "lo", "up"},
		{"ip", "-n", l.cli, "link", "set", "lo", "up"},
	} {
		run(t, c...)
	}
	return l
}

// inNS runs f on a thread switched into the named namespace; sockets made
// there stay in it.
func inNS(t *testing.T, name string, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	defer netns.Set(orig)
	f()
}

// listen opens a TCP listener in srv that accepts and closes.
func (l lab) listen(t *testing.T, addr string) int {
	t.Helper()
	var ln net.Listener
	inNS(t, l.srv, func() {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// dial connects from cli with source address src; nil on success.
func (l lab) dial(t *testing.T, src, dst string, port int) error {
	return l.dialFrom(t, l.cli, src, dst, port)
}

// dialFrom connects from namespace ns with source address src.
func (l lab) dialFrom(t *testing.T, ns, src, dst string, port int) error {
	t.Helper()
	var err error
	inNS(t, ns, func() {
		d := net.Dialer{Timeout: 700 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		var c net.Conn
		if c, err = d.Dial("tcp", net.JoinHostPort(dst, strconv.Itoa(port))); err == nil {
			c.Close()
		}
	})
	return err
}

// TestGuardsPortsInNetns: with the table in place, ports A and B answer only
// allowed source IPs (v4 and v6); another port is not touched; Sync, Allow
// and Revoke change who gets in; Close opens the ports again.
func TestGuardsPortsInNetns(t *testing.T) {
	rvtest.NeedRoot(t, "ip", "nft") // apt-get install iproute2 nftables
	l := newLab(t)
	portA := l.listen(t, "0.0.0.0:0")
	portB := l.listen(t, "[::]:0")
	other := l.listen(t, "0.0.0.0:0")
	var logs bytes.Buffer
	fw, err := Open(context.Background(), Config{Ports: []int{portA, portB}, Nft: RunNft("ip", "netns", "exec", l.srv, "nft"),
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		src, dst string
		port     int
		want     bool
	}
	check := func(stage string, probes []probe) {
		t.Helper()
		for _, p := range probes {
			err := l.dial(t, p.src, p.dst, p.port)
			if got := err == nil; got != p.want {
				t.Errorf("%s: dial %s → %s:%d: connected=%v (%v), want %v", stage, p.src, p.dst, p.port, got, err, p.want)
			}
		}
	}
	check("nobody allowed", []probe{
		{"10.231.0.2", "10.231.0.1", portA, false},
		{"fd31::2", "fd31::1", portB, false},
		{"10.231.0.3", "10.231.0.1", other, true},
	})
	// The head's own machine always gets in over loopback, v4 and v6, to
	// loopback and to its own public address.
	for _, p := range []probe{{"127.0.0.1", "127.0.0.1", portA, true}, {"::1", "::1", portB, true},
		{"10.231.0.1", "10.231.0.1", portA, true}, {"fd31::1", "fd31::1", portB, true}} {
		if err := l.dialFrom(t, l.srv, p.src, p.dst, p.port); err != nil {
			t.Errorf("loopback dial %s → %s:%d: %v, want connected", p.src, p.dst, p.port, err)
		}
	}
	if err := fw.Sync([]string{"10.231.0.2", "fd31::2"}); err != nil {
		t.Fatal(err)
	}
	check("candidate .2 allowed", []probe{
		{"10.231.0.2", "10.231.0.1", portA, true},
		{"10.231.0.2", "10.231.0.1", portB, true},
		{"fd31::2", "fd31::1", portB, true},
		{"10.231.0.3", "10.231.0.1", portA, false},
		{"fd31::3", "fd31::1", portB, false},
	})
	if err := fw.Revoke("10.231.0.2"); err != nil {
		t.Fatal(err)
	}
	if err := fw.Allow("10.231.0.3"); err != nil {
		t.Fatal(err)
	}
	check("after revoke .2, allow .3", []probe{
		{"10.231.0.2", "10.231.0.1", portA, false},
		{"10.231.0.3", "10.231.0.1", portA, true},
		{"fd31::2", "fd31::1", portB, true},
	})
	if got := fmt.Sprint(fw.Allowed()); got != "[10.231.0.3 fd31::2]" {
		t.Errorf("Allowed = %s", got)
	}
	nsNft := RunNft("ip", "netns", "exec", l.srv, "nft")
	if !Exists(context.Background(), "rayvast", nsNft) {
		t.Error("Exists = false with the table in place")
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if Exists(context.Background(), "rayvast", nsNft) {
		t.Error("Exists = true after Close")
	}
	check("closed", []probe{{"10.231.0.2", "10.231.0.1", portA, true}})
	if !strings.Contains(logs.String(), "added") {
		t.Errorf("changes not logged: %s", logs.String())
	}
	// Remove of an absent table is not an error (head down twice).
	if err := Remove(context.Background(), "rayvast", RunNft("ip", "netns", "exec", l.srv, "nft")); err != nil {
		t.Errorf("Remove absent table: %v", err)
	}
}

// TestGuardsRayPortsInNetns: the Ray head's ports, once SyncPorts names
// them, answer only allowed IPs and the machine itself, as A and B do; a
// port dropped from the list is open again; an unnamed port never changes.
func TestGuardsRayPortsInNetns(t *testing.T) {
	rvtest.NeedRoot(t, "ip", "nft") // apt-get install iproute2 nftables
	l := newLab(t)
	portA := l.listen(t, "0.0.0.0:0")
	gcs := l.listen(t, "10.231.0.1:0")
	metrics := l.listen(t, "[::]:0")
	other := l.listen(t, "0.0.0.0:0")
	fw, err := Open(context.Background(), Config{Ports: []int{portA}, Nft: RunNft("ip", "netns", "exec", l.srv, "nft")})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	want := func(stage, src, dst string, port int, connect bool) {
		t.Helper()
		if err := l.dial(t, src, dst, port); (err == nil) != connect {
			t.Errorf("%s: dial %s → %s:%d: %v, want connected=%v", stage, src, dst, port, err, connect)
		}
	}
	want("before SyncPorts", "10.231.0.3", "10.231.0.1", gcs, true)
	if err := fw.Sync([]string{"10.231.0.2"}); err != nil {
		t.Fatal(err)
	}
	if err := fw.SyncPorts([]int{metrics, gcs, gcs}); err != nil {
		t.Fatal(err)
	}
	if got, w := fmt.Sprint(fw.RayPorts()), fmt.Sprint([]int{min(gcs, metrics), max(gcs, metrics)}); got != w {
		t.Errorf("RayPorts = %s, want %s", got, w)
	}
	want("stranger, gcs", "10.231.0.3", "10.231.0.1", gcs, false)
	want("stranger, metrics v4", "10.231.0.3", "10.231.0.1", metrics, false)
	want("stranger, metrics v6", "fd31::3", "fd31::1", metrics, false)
	want("stranger, other port", "10.231.0.3", "10.231.0.1", other, true)
	want("node, gcs", "10.231.0.2", "10.231.0.1", gcs, true)
	want("node, metrics", "10.231.0.2", "10.231.0.1", metrics, true)
	if err := l.dialFrom(t, l.srv, "10.231.0.1", "10.231.0.1", metrics); err != nil {
		t.Errorf("the head's machine to its own metrics port: %v, want connected", err)
	}
	if err := fw.SyncPorts([]int{gcs}); err != nil {
		t.Fatal(err)
	}
	want("metrics no longer listed", "10.231.0.3", "10.231.0.1", metrics, true)
	want("gcs still listed", "10.231.0.3", "10.231.0.1", gcs, false)
	if err := fw.SyncPorts([]int{0}); err == nil {
		t.Error("SyncPorts took port 0")
	}
}
