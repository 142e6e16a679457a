package docker

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/vastnet"
)

// netProbe runs in a candidate (python3 of the image): it answers on its
// first and last port with what it sees, prints its own addresses, calls
// the head's listener, asks the who-am-I DNS for its IP, and once the test
// has reached it from outside (so hairpin mode is set), connects to its own
// public IP:port.
const netProbe = `
import os, socket, struct, threading, time
pub = os.environ["RAYVAST_PUBLIC_IP"]
ports = [int(p) for p in os.environ["RAYVAST_PORTS"].split(",")]
me = os.environ["RAYVAST_INSTANCE_ID"]
reached = threading.Event()
def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(16)
    while True:
        c, a = s.accept()
        c.sendall(("peer=%s name=%s\n" % (a[0], me)).encode())
        c.close()
        if a[0] != pub:
            reached.set()
for p in (ports[0], ports[-1]):
    threading.Thread(target=serve, args=(p,), daemon=True).start()
local = set()
lines = open("/proc/net/fib_trie").read().split("\n")
for i, l in enumerate(lines):
    if "/32 host LOCAL" in l:
        local.add(lines[i-1].split()[-1])
print("local=" + ",".join(sorted(local)), flush=True)
try:
    socket.socket().bind((pub, ports[1]))
    print("bind_public=ok", flush=True)
except OSError as e:
    print("bind_public=" + str(e.errno), flush=True)
host, port = os.environ["TEST_HEAD"].rsplit(":", 1)
c = socket.create_connection((host, int(port)), 5)
c.sendall((me + "\n").encode())
c.close()
dh, dp = os.environ["TEST_DNS"].rsplit(":", 1)
q = struct.pack(">HHHHHH", 7, 0x100, 1, 0, 0, 0) + b"".join(bytes([len(x)]) + x.encode() for x in "myip.opendns.com".split(".")) + b"\0" + struct.pack(">HH", 1, 1)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(5)
u.sendto(q, (dh, int(dp)))
r = u.recv(512)
print("whoami=" + socket.inet_ntoa(r[-4:]), flush=True)
reached.wait(60)
try:
    h = socket.create_connection((pub, ports[0]), 3)
    print("hairpin=" + h.recv(200).decode().strip(), flush=True)
except Exception as e:
    print("hairpin_err=" + type(e).__name__, flush=True)
print("done", flush=True)
time.sleep(600)
`

// headListener is the head's stand-in: it records the source address of
// each connection by the instance name the candidate sends.
type headListener struct {
	l    net.Listener
	seen chan [2]string // name, source IP
}

func listenHead(t *testing.T, ip string) *headListener {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	h := &headListener{l: l, seen: make(chan [2]string, 16)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			src, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			c.Close()
			h.seen <- [2]string{strings.TrimSpace(line), src}
		}
	}()
	return h
}

// from waits for the candidate's connection and returns its source IP.
func (h *headListener) from(t *testing.T, name string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s := <-h.seen:
			if s[0] == name {
				return s[1]
			}
			h.seen <- s // another candidate's: keep it for its own wait
			time.Sleep(10 * time.Millisecond)
		case <-timeout:
			t.Fatalf("no connection from %s reached the head's listener", name)
			return ""
		}
	}
}

// dialLine connects from this machine (the head's side) and reads a line.
func dialLine(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

type netRig struct {
	p    *Provider
	head *headListener
	fw   *firewall.Firewall // guards the head's listener, as the head's own
	ctx  context.Context
}

func openNetRig(t *testing.T, opts vastnet.Options) *netRig {
	t.Helper()
	eng := engine(t)
	img := testImageOn(t, eng, candidateimage.BaseHost)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cluster := fmt.Sprintf("ntest-%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { _ = vastnet.Cleanup(context.Background(), eng, func(c string) bool { return c == cluster }) })
	p, err := New(ctx, Config{Engine: eng, Cluster: cluster, Settings: Settings{Image: img, Net: opts}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	head := listenHead(t, p.Network().Gateway.String())
	_, port, _ := net.SplitHostPort(head.l.Addr().String())
	n, _ := strconv.Atoi(port)
	fw, err := firewall.Open(ctx, firewall.Config{Table: fmt.Sprintf("rvtest_%d", time.Now().UnixNano()%1e9), Ports: []int{n}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close() })
	return &netRig{p: p, head: head, fw: fw, ctx: ctx}
}

func (r *netRig) rent(t *testing.T, id string) provider.Rental {
	t.Helper()
	rt, err := r.p.Rent(r.ctx, provider.RentRequest{CandidateID: id, NodeType: "cpu", Command: `exec python3 -u -c "$TEST_SCRIPT"`,
		Env: map[string]string{"TEST_SCRIPT": netProbe, "TEST_HEAD": r.head.l.Addr().String(), "TEST_DNS": r.p.DNSAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	// The head's firewall lets the candidate's public IP in (its first SYN
	// may be dropped before this: TCP sends it again).
	if err := r.fw.Allow(rt.PublicIP); err != nil {
		t.Fatal(err)
	}
	return rt
}

// output waits for the probe's "done" and returns its key=value lines.
func (r *netRig) output(t *testing.T, instance string) map[string]string {
	t.Helper()
	for i := 0; i < 600; i++ {
		out, _, err := r.p.eng.ContainerLogs(r.ctx, instance)
		if err == nil && strings.Contains(string(out), "done\n") {
			kv := map[string]string{}
			for _, l := range strings.Split(string(out), "\n") {
				if k, v, ok := strings.Cut(l, "="); ok {
					kv[k] = v
				}
			}
			return kv
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, errOut, _ := r.p.eng.ContainerLogs(r.ctx, instance)
	t.Fatalf("%s never printed done:\n%s\n%s", instance, out, errOut)
	return nil
}

// TestVastNetwork rents real containers and checks vast's network from
// inside and outside, hairpin off and on: the public IP is on none of the
// container's interfaces (a bind to it fails with EADDRNOTAVAIL); this
// machine reaches public IP:port (first and last of the 64) and gets the
// container, and nothing on a port that is not the candidate's; the
// candidate's connection to the head (through the head's firewall, which
// allows only the public IP) and its who-am-I query arrive from the public
// IP; its connection to its own public IP:port reaches itself (from its
// public IP) only with hairpin on, and is refused without.
func TestVastNetwork(t *testing.T) {
	for _, hairpin := range []bool{false, true} {
		t.Run("hairpin="+strconv.FormatBool(hairpin), func(t *testing.T) {
			r := openNetRig(t, vastnet.Options{Hairpin: hairpin})
			rt := r.rent(t, "c1")
			pub := netip.MustParseAddr(rt.PublicIP)
			if !r.p.VastNet().Public.Subnet.Contains(pub) || r.p.Network().Subnet.Contains(pub) {
				t.Fatalf("public IP %s: want it in the public network %s, not in %s", pub, r.p.VastNet().Public.Subnet, r.p.Network().Subnet)
			}
			if src := r.head.from(t, rt.InstanceID); src != rt.PublicIP {
				t.Errorf("the head saw the candidate's connection from %s, want its public IP %s", src, rt.PublicIP)
			}
			ports := Ports()
			for _, port := range []int{ports[0], ports[len(ports)-1]} {
				line, err := dialLine(net.JoinHostPort(rt.PublicIP, strconv.Itoa(port)))
				if err != nil || !strings.HasSuffix(line, "name="+rt.InstanceID) {
					t.Errorf("this machine → %s:%d: %q, %v; want the candidate's answer", rt.PublicIP, port, line, err)
				}
			}
			if _, err := dialLine(net.JoinHostPort(rt.PublicIP, strconv.Itoa(ports[len(ports)-1]+1))); err == nil || !strings.Contains(err.Error(), "refused") {
				t.Errorf("a port not the candidate's: %v, want refused", err)
			}
			kv := r.output(t, rt.InstanceID)
			local := strings.Split(kv["local"], ",")
			if len(local) == 0 || strings.Contains(","+kv["local"]+",", ","+rt.PublicIP+",") {
				t.Errorf("container's own addresses %v: the public IP %s must be on none", local, rt.PublicIP)
			}
			if kv["bind_public"] != strconv.Itoa(int(syscall.EADDRNOTAVAIL)) {
				t.Errorf("bind to the public IP inside: %q, want errno EADDRNOTAVAIL (%d), as Ray's agents get on vast", kv["bind_public"], syscall.EADDRNOTAVAIL)
			}
			if kv["whoami"] != rt.PublicIP {
				t.Errorf("who-am-I from inside = %q, want the public IP %s", kv["whoami"], rt.PublicIP)
			}
			wantHairpin := "peer=" + rt.PublicIP + " name=" + rt.InstanceID
			switch {
			case hairpin && kv["hairpin"] != wantHairpin:
				t.Errorf("hairpin on: own public IP:port gave %q (error %q), want %q", kv["hairpin"], kv["hairpin_err"], wantHairpin)
			case !hairpin && kv["hairpin_err"] != "ConnectionRefusedError":
				t.Errorf("hairpin off: own public IP:port gave %q (error %q), want ConnectionRefusedError", kv["hairpin"], kv["hairpin_err"])
			}
		})
	}
}

// TestVastNetworkSharedIP: two candidates behind one public IP, each with
// its own 64 ports, both reached through them and both seen by the head
// from that IP; a third gets the next IP and the first block again.
func TestVastNetworkSharedIP(t *testing.T) {
	r := openNetRig(t, vastnet.Options{PerIP: 2})
	a, b, c := r.rent(t, "a"), r.rent(t, "b"), r.rent(t, "c")
	if a.PublicIP != b.PublicIP || c.PublicIP == a.PublicIP {
		t.Fatalf("public IPs %s %s %s: want a and b on one, c on another", a.PublicIP, b.PublicIP, c.PublicIP)
	}
	for _, x := range []struct {
		rt    provider.Rental
		first int
	}{{a, vastnet.FirstPort}, {b, vastnet.FirstPort + vastnet.NumPorts}, {c, vastnet.FirstPort}} {
		if src := r.head.from(t, x.rt.InstanceID); src != x.rt.PublicIP {
			t.Errorf("%s: the head saw %s, want %s", x.rt.InstanceID, src, x.rt.PublicIP)
		}
		for _, port := range []int{x.first, x.first + vastnet.NumPorts - 1} {
			line, err := dialLine(net.JoinHostPort(x.rt.PublicIP, strconv.Itoa(port)))
			if err != nil || !strings.HasSuffix(line, "name="+x.rt.InstanceID) {
				t.Errorf("%s:%d: %q, %v; want %s's answer", x.rt.PublicIP, port, line, err, x.rt.InstanceID)
			}
		}
		if kv := r.output(t, x.rt.InstanceID); kv["whoami"] != x.rt.PublicIP {
			t.Errorf("%s: who-am-I %q, want %s", x.rt.InstanceID, kv["whoami"], x.rt.PublicIP)
		}
	}
	// Ended, a candidate's ports lead nowhere, and its neighbour's still work.
	if err := r.p.Destroy(r.ctx, a.InstanceID); err != nil {
		t.Fatal(err)
	}
	if _, err := dialLine(net.JoinHostPort(a.PublicIP, strconv.Itoa(vastnet.FirstPort))); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a destroyed candidate's port: %v, want refused", err)
	}
	if line, err := dialLine(net.JoinHostPort(b.PublicIP, strconv.Itoa(vastnet.FirstPort+vastnet.NumPorts))); err != nil || !strings.HasSuffix(line, "name="+b.InstanceID) {
		t.Errorf("after a's end, b: %q, %v", line, err)
	}
}

// TestOpenWithoutNft: without nft the provider does not open (its ports
// would lead nowhere) and says what to install.
func TestOpenWithoutNft(t *testing.T) {
	eng := engine(t)
	img := testImageOn(t, eng, candidateimage.BaseHost)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := fmt.Sprintf("ntest-%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { _ = vastnet.Cleanup(context.Background(), eng, func(c string) bool { return c == cluster }) })
	_, err := New(ctx, Config{Engine: eng, Cluster: cluster, Settings: Settings{Image: img}, Nft: firewall.RunNft("rayvast-test-no-such-nft")})
	if err == nil || !strings.Contains(err.Error(), "apt-get install nftables") {
		t.Errorf("Open without nft: %v, want the install hint", err)
	}
}

// dialProbe runs in a candidate: it answers on its first port with its
// name, then takes orders from the test over one connection to the head's
// side: each line is an address to dial from inside; it answers "ok
// <peer's line>" or "err <exception> <errno>".
const dialProbe = `
import os, socket, threading
ports = [int(p) for p in os.environ["RAYVAST_PORTS"].split(",")]
me = os.environ["RAYVAST_INSTANCE_ID"]
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", ports[0]))
l.listen(16)
def serve():
    while True:
        c, a = l.accept()
        c.sendall(("name=%s peer=%s\n" % (me, a[0])).encode())
        c.close()
threading.Thread(target=serve, daemon=True).start()
host, port = os.environ["TEST_HEAD"].rsplit(":", 1)
ctl = socket.create_connection((host, int(port)), 30)
ctl.sendall((me + "\n").encode())
f = ctl.makefile("rw")
for line in f:
    h, p = line.strip().rsplit(":", 1)
    try:
        s = socket.create_connection((h, int(p)), 3)
        s.settimeout(3)
        f.write("ok " + s.makefile().readline().strip() + "\n")
        s.close()
    except Exception as e:
        f.write("err %s %s\n" % (type(e).__name__, getattr(e, "errno", "")))
    f.flush()
`

// TestVastNetworkRentalsApart: two rentals on the Docker vast network reach
// each other only as on vast, where they sit on different hosts: at the
// other's public IP:forwarded port (the answer names the peer and shows the
// caller's public IP), never at its private IP:port (refused, in both
// directions, although both sit on one Docker bridge and the listener is
// the same socket); each still reaches the head's listener on the gateway.
// Run against a table without the isolation (head/vastnet's bridge table
// and forward rule) the private dials answer "ok".
func TestVastNetworkRentalsApart(t *testing.T) {
	r := openNetRig(t, vastnet.Options{})
	ctl := map[string]*bufio.ReadWriter{}
	conns := make(chan net.Conn, 2)
	// The rig's head listener only records names; this one keeps the
	// connection to send orders on.
	l, err := net.Listen("tcp", net.JoinHostPort(r.p.Network().Gateway.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	var rts []provider.Rental
	for _, id := range []string{"a", "b"} {
		rt, err := r.p.Rent(r.ctx, provider.RentRequest{CandidateID: id, NodeType: "cpu", Command: `exec python3 -u -c "$TEST_SCRIPT"`,
			Env: map[string]string{"TEST_SCRIPT": dialProbe, "TEST_HEAD": l.Addr().String()}})
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
	}
	for range rts {
		select {
		case c := <-conns:
			defer c.Close()
			rw := bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
			name, _ := rw.ReadString('\n')
			ctl[strings.TrimSpace(name)] = rw
		case <-time.After(60 * time.Second):
			for _, rt := range rts {
				out, errOut, _ := r.p.eng.ContainerLogs(r.ctx, rt.InstanceID)
				t.Logf("%s:\n%s%s", rt.InstanceID, out, errOut)
			}
			t.Fatalf("the rentals did not all call the head's side (%d of 2)", len(ctl))
		}
	}
	priv := map[string]string{}
	for _, rt := range rts {
		info, err := r.p.eng.InspectContainer(r.ctx, rt.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := vastnet.EndpointFrom(info.Config.Labels)
		if !ok {
			t.Fatalf("no endpoint in %s's labels %v", rt.InstanceID, info.Config.Labels)
		}
		priv[rt.InstanceID] = e.Private.String()
	}
	dial := func(from, addr string) string {
		rw := ctl[from]
		if rw == nil {
			t.Fatalf("no control connection from %s", from)
		}
		fmt.Fprintln(rw, addr)
		rw.Flush()
		line, err := rw.ReadString('\n') // within the probe's 3 s timeouts

		if err != nil {
			t.Fatalf("%s: no answer for %s: %v", from, addr, err)
		}
		return strings.TrimSpace(line)
	}
	port := strconv.Itoa(Ports()[0])
	for i, from := range rts {
		to := rts[1-i]
		got := dial(from.InstanceID, net.JoinHostPort(to.PublicIP, port))
		if want := "ok name=" + to.InstanceID + " peer=" + from.PublicIP; got != want {
			t.Errorf("%s → %s's public IP:port %s:%s: %q, want %q (vast's path between rentals)", from.InstanceID, to.InstanceID, to.PublicIP, port, got, want)
		}
		got = dial(from.InstanceID, net.JoinHostPort(priv[to.InstanceID], port))
		if !strings.HasPrefix(got, "err ") {
			t.Errorf("%s → %s's private IP:port %s:%s: %q, want an error: on vast rentals are on different hosts", from.InstanceID, to.InstanceID, priv[to.InstanceID], port, got)
		} else {
			t.Logf("%s → %s's private %s:%s: %s", from.InstanceID, to.InstanceID, priv[to.InstanceID], port, got)
		}
	}
}
