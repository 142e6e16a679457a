package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// engine returns the local Docker Engine or skips (fails when CI=true).
func engine(t *testing.T) *dockerengine.Client {
	t.Helper()
	rvtest.NeedDocker(t) // these tests rent real containers
	return dockerengine.New("")
}

// testImage builds (or reuses) the candidate image from the repo's fakeray
// on the default base.
func testImage(t *testing.T, eng *dockerengine.Client) string { return testImageOn(t, eng, "") }

func testImageOn(t *testing.T, eng *dockerengine.Client, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img, err := candidateimage.Build(ctx, candidateimage.Config{Engine: eng, FakerayDir: "../../../test/fakeray", Base: base})
	if err != nil {
		t.Fatalf("build image: %v", err)
	}
	return img
}

// probe is the command of the test rentals: it prints what a candidate's
// host checks look at, then waits to be stopped.
const probe = `echo "ip=$RAYVAST_PUBLIC_IP id=$RAYVAST_INSTANCE_ID"
echo "ports=$RAYVAST_PORTS"
echo "resolvers=$RAYVAST_EGRESS_RESOLVERS"
grep CapBnd /proc/self/status
echo "shm=$(ls -A /dev/shm | wc -l)"
python3 -c 'import ray; print("ray", ray.__file__)'
echo done
exec sleep 600`

// TestRentShapesAVastRental rents a safe and an unsafe container and checks
// what crosses the boundary: the env the provider adds, dropped (or kept)
// NET_RAW, an empty /dev/shm, an importable ray, distinct fixed addresses on
// the cluster network, labels found by List, Get, Destroy and ErrGone.
func TestRentShapesAVastRental(t *testing.T) {
	for _, base := range []string{candidateimage.BaseDebootstrap, candidateimage.BaseHost} {
		t.Run(base, func(t *testing.T) { testRent(t, base) })
	}
}

func testRent(t *testing.T, base string) {
	eng := engine(t)
	img := testImageOn(t, eng, base)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster := fmt.Sprintf("ptest-%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { _ = vastnet.Cleanup(context.Background(), eng, func(c string) bool { return c == cluster }) })

	p, err := New(ctx, Config{Engine: eng, Cluster: cluster, StateDir: t.TempDir(),
		Settings: Settings{Image: img, UnsafeNodeTypes: []string{"risky"}, MemoryBytes: 512 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	gw := p.Network().Gateway.String()

	safe, err := p.Rent(ctx, provider.RentRequest{CandidateID: "c1", NodeType: "cpu", Command: probe, Env: map[string]string{"RAYVAST_HEAD": gw}})
	if err != nil {
		t.Fatal(err)
	}
	unsafe, err := p.Rent(ctx, provider.RentRequest{CandidateID: "c2", NodeType: "risky", Command: probe})
	if err != nil {
		t.Fatal(err)
	}
	if safe.PublicIP == unsafe.PublicIP || safe.PublicIP == "" || safe.InstanceID != InstanceName(cluster, "c1") || safe.HostID != safe.InstanceID {
		t.Errorf("rentals %+v %+v: want distinct IPs, instance = host = container name", safe, unsafe)
	}

	logs := func(id string) string {
		for i := 0; i < 200; i++ {
			out, _, err := eng.ContainerLogs(ctx, id)
			if err == nil && strings.Contains(string(out), "done") {
				return string(out)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s never printed done", id)
		return ""
	}
	capNetRaw := func(out string) bool {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "CapBnd:" {
				v, _ := strconv.ParseUint(f[1], 16, 64)
				if v&(1<<12) != 0 {
					t.Errorf("CAP_NET_ADMIN in bounding set %s", f[1])
				}
				return v&(1<<13) != 0
			}
		}
		t.Fatalf("no CapBnd in %q", out)
		return false
	}
	out := logs(safe.InstanceID)
	for _, want := range []string{
		"ip=" + safe.PublicIP + " id=" + safe.InstanceID + "\n",
		"ports=20000,20001,", ",20063\n",
		"resolvers=opendns@" + p.DNSAddr() + ",google@" + p.DNSAddr() + ",cloudflare@" + p.DNSAddr(),
		"shm=0", "ray /opt/fakeray/ray/__init__.py",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("safe rental output lacks %q:\n%s", want, out)
		}
	}
	if capNetRaw(out) {
		t.Error("safe rental kept NET_RAW")
	}
	// Bounds a candidate cannot lift: no host network, not privileged, a
	// pids limit (a fork bomb stops there), the memory limit asked for.
	info, err := eng.InspectContainer(ctx, safe.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if hc := info.HostConfig; hc.NetworkMode != p.Network().Name || hc.Privileged || hc.PidsLimit == nil || *hc.PidsLimit != DefaultPidsLimit || hc.Memory != 512<<20 {
		pids := int64(-1)
		if hc.PidsLimit != nil {
			pids = *hc.PidsLimit
		}
		t.Errorf("host config: network %q privileged %v pids %d memory %d; want %q false %d %d", hc.NetworkMode, hc.Privileged, pids, hc.Memory, p.Network().Name, DefaultPidsLimit, 512<<20)
	}
	if !capNetRaw(logs(unsafe.InstanceID)) {
		t.Error("unsafe rental lost NET_RAW")
	}

	list, err := p.List(ctx)
	if err != nil || len(list) != 2 || list[0].CandidateID != "c1" || !list[0].Running || list[1].PublicIP != unsafe.PublicIP {
		t.Errorf("List = %+v, %v; want both rentals, running", list, err)
	}
	if got, err := p.Get(ctx, safe.InstanceID); err != nil || got != safe {
		t.Errorf("Get = %+v, %v; want %+v", got, err, safe)
	}
	if err := p.Destroy(ctx, safe.InstanceID); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, safe.InstanceID); !errors.Is(err, provider.ErrGone) {
		t.Errorf("Get after Destroy: %v, want ErrGone", err)
	}
	if err := p.Destroy(ctx, safe.InstanceID); err != nil {
		t.Errorf("Destroy twice: %v, want nil", err)
	}
	// Renting the same candidate again finds its container.
	if again, err := p.Rent(ctx, provider.RentRequest{CandidateID: "c2", NodeType: "risky", Command: probe}); err != nil || again != unsafe {
		t.Errorf("Rent of an existing candidate = %+v, %v; want %+v", again, err, unsafe)
	}
	// A freed address is reused.
	again, err := p.Rent(ctx, provider.RentRequest{CandidateID: "c3", NodeType: "cpu", Command: probe})
	if err != nil || again.PublicIP != safe.PublicIP {
		t.Errorf("re-rent got %+v, %v; want the freed address %s", again, err, safe.PublicIP)
	}
}

// TestReopenKeepsNetworkAndDNSPort proves a restarted head finds the same
// network, the same DNS port (candidates' env names it) and its rentals.
func TestReopenKeepsNetworkAndDNSPort(t *testing.T) {
	eng := engine(t)
	img := testImage(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster := fmt.Sprintf("ptest-%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { _ = vastnet.Cleanup(context.Background(), eng, func(c string) bool { return c == cluster }) })
	state := t.TempDir()
	p1, err := New(ctx, Config{Engine: eng, Cluster: cluster, Settings: Settings{Image: img}, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	r, err := p1.Rent(ctx, provider.RentRequest{CandidateID: "a", Command: "exec sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	dns1, net1 := p1.DNSAddr(), p1.Network()
	p1.Close()
	p2, err := New(ctx, Config{Engine: eng, Cluster: cluster, Settings: Settings{Image: img}, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if p2.DNSAddr() != dns1 || p2.Network() != net1 {
		t.Errorf("reopen: dns %s net %+v, want %s %+v", p2.DNSAddr(), p2.Network(), dns1, net1)
	}
	if list, err := p2.List(ctx); err != nil || len(list) != 1 || list[0].InstanceID != r.InstanceID {
		t.Errorf("List after reopen = %+v, %v", list, err)
	}
}

// TestNetworkAroundHeadIP: a head initialised with a private IP no
// interface has gets its network built around it, so the head can listen
// there once the provider is open.
func TestNetworkAroundHeadIP(t *testing.T) {
	eng := engine(t)
	img := testImage(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := fmt.Sprintf("ptest-%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { _ = vastnet.Cleanup(context.Background(), eng, func(c string) bool { return c == cluster }) })
	headIP := fmt.Sprintf("10.213.%d.1", time.Now().UnixNano()%200+20)
	p, err := New(ctx, Config{Engine: eng, Cluster: cluster, Settings: Settings{Image: img}, HeadIP: headIP})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := p.Network(); got.Gateway.String() != headIP || got.Subnet.Bits() != 24 || !got.Subnet.Contains(got.Gateway) {
		t.Errorf("network %+v, want a /24 with gateway %s", got, headIP)
	}
	if !strings.HasPrefix(p.DNSAddr(), headIP+":") {
		t.Errorf("DNS on %s, want the head IP", p.DNSAddr())
	}
}
