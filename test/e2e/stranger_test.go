package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/rayvast/rayvast/head/listenports"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestStrangerNewest and TestStrangerOldest (issue 21): with real Ray, a
// stranger on the internet of the local vast network (its own address,
// routed to the nodes' public IPs and the head's IP, nothing more) tries
// every one of each node's 64 ports and every port the head's machine
// listens on at the head's IP: it connects, then asks what that port's
// service would give: metrics, an HTTP job submission (the dashboard's job
// API and the dashboard agent's), a runtime-env creation, gRPC calls
// without TLS, with no client certificate and with one from another CA, a
// Ray Client session, the guest API beyond its anonymous scope. Nothing
// may answer anything useful: on the head's machine the cluster's ports
// (A, B and every port the Ray head's processes listen on) must not even
// connect (the head's firewall, --firewall on). The same calls from the
// cluster are the positive control: the demo's cluster job runs on both
// nodes with the guard on; from the head's machine the Ray head's metrics
// answer, the GCS and each node's raylet answer gRPC with the cluster's
// certificate, the job API answers with the token (and refuses without
// it), a Ray Client session runs, the guest API answers a scoped token.
func TestStrangerNewest(t *testing.T) { testStranger(t, rvtest.RayNewest) }

// TestStrangerOldest is TestStrangerNewest with the oldest supported Ray.
func TestStrangerOldest(t *testing.T) { testStranger(t, rvtest.RayOldest) }

func testStranger(t *testing.T, version string) {
	rvtest.NeedRoot(t, "ip", "iptables", "nft")
	c := startRayCluster(t, version, 2, "--firewall", "on")
	nodes := c.waitRunning(2, 4*time.Minute)
	c.waitRayHeadSettled(t, 3*time.Minute)
	st, err := statedir.Load(c.state)
	if err != nil {
		t.Fatal(err)
	}
	files := rayHeadFilesOf(t, c.state)

	headTargets, rayClient := c.headTargets(t)
	var nodeTargets []target
	var ips []string
	for _, n := range nodes {
		ips = append(ips, n.PublicIP)
		nodeTargets = append(nodeTargets, nodeTargetsOf(t, n)...)
	}
	s := newStranger(t, append(ips, c.headIP)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	cs := []creds{{name: "no client cert"}, {name: "cert of another CA", cert: foreignCert(t, strangerIP)}}
	t.Run("the head's machine, as a stranger", func(t *testing.T) {
		// The who-am-I DNS stands in for vast's public resolvers: the
		// internet's, open to all (it answers nothing else).
		judgeHeadMachine(t, probeAll(ctx, s.dial, headTargets, cs), func(role string) bool { return !strings.Contains(role, "who-am-I") })
	})
	t.Run("each node's 64 ports, as a stranger", func(t *testing.T) {
		for i, r := range probeAll(ctx, s.dial, nodeTargets, cs) {
			if r.connected {
				t.Log(r.summary())
			}
			for _, b := range strangerGot(r, nodeTargets[i].guest) {
				t.Errorf("%s (%s): stranger got %s", r.target, r.role, b)
			}
		}
	})
	t.Run("a Ray Client session, as a stranger", func(t *testing.T) {
		if rayClient == "" {
			t.Fatal("no Ray Client server among the Ray head's listeners")
		}
		foreign := writeForeignTLS(t, t.TempDir())
		for _, env := range [][]string{{"RAY_USE_TLS=0"}, foreign} {
			pctx, cancel := context.WithTimeout(ctx, 150*time.Second)
			out, _ := s.python(pctx, c.python, append(env, "RAY_USAGE_STATS_ENABLED=0"), rayClientCode(rayClient))
			cancel()
			if strings.Contains(out, "CLIENT-OK") {
				t.Errorf("Ray Client session at %s from the stranger (%s) ran:\n%s", rayClient, strings.Join(env, " "), out)
			} else {
				t.Logf("Ray Client at %s from the stranger (%s): refused: %s", rayClient, env[0], lastLine(out))
			}
		}
	})

	// The positive control: the same doors from the cluster.
	cluster := creds{name: "the cluster's", cert: files.cert, token: files.token}
	t.Run("the same calls from the cluster", func(t *testing.T) {
		for _, r := range probeAll(ctx, hostDial, headTargets, []creds{cluster}) {
			if !strings.HasPrefix(r.role, "other:") && r.connected {
				t.Log("from the head's machine: " + r.summary())
			}
		}
		c.metricsControl(ctx, t)
		gcsAddr := c.rayAddress(t)
		gcs := grpcCall(ctx, client(hostDial, true, cluster), "https", gcsAddr, grpcMethods[0], files.token, "TLS, the cluster's")
		if gcs.err != nil || gcs.grpcStatus == "" {
			t.Errorf("GCS from the head's machine with the cluster's certificate: %s, want a gRPC answer", gcs)
		}
		for _, tg := range nodeTargets {
			if tg.role == "raylet (node manager)" {
				a := grpcCall(ctx, client(hostDial, true, cluster), "https", tg.addr, grpcMethods[1], files.token, "TLS, the cluster's")
				if a.err != nil || a.grpcStatus == "" {
					t.Errorf("raylet %s from the head's machine with the cluster's certificate: %s, want a gRPC answer", tg.addr, a)
				}
			}
		}
		c.jobAPIControl(ctx, t, files.token)
		cmd := exec.CommandContext(ctx, suite.head, "run", "--state", c.state, "--", "python", "-c", rayClientCode(rayClient))
		if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "CLIENT-OK") {
			t.Errorf("Ray Client session at %s through head run: %v\n%s", rayClient, err, b)
			c.dumpRayClientLogs(t)
		}
		guestControl(ctx, t, st, nodes)
		nodeInside(ctx, t, nodes, files.token, version)
		res, out := c.job(2, 2*time.Minute)
		if !res.OK {
			c.dumpGuard(t, nodes)
		}
		checkJob(t, res, out, 2, version) // Ray works with every guard on
	})
	checkNoSecret(t, c, files.token)
}

// judgeHeadMachine fails the test for each of the cluster's ports on the
// head's machine that gave the stranger anything, and for each that
// connected where shut(role) says the firewall guards it; it logs every
// report and returns how many of the cluster's ports it judged (others'
// are only reported).
func judgeHeadMachine(t *testing.T, reports []portReport, shut func(role string) bool) (judged int) {
	t.Helper()
	for _, r := range reports {
		t.Log(r.summary())
		if strings.HasPrefix(r.role, "other:") {
			continue
		}
		judged++
		if r.connected && shut(r.role) {
			t.Errorf("%s (%s) connects from the stranger: the head's firewall does not guard it", r.target, r.role)
		}
		for _, b := range strangerGot(r, false) {
			t.Errorf("%s (%s): stranger got %s", r.target, r.role, b)
		}
	}
	return judged
}

// rayAddress is the Ray head's GCS address (the config's ray.head_address).
func (c *rayCluster) rayAddress(t *testing.T) string {
	t.Helper()
	st, ok, err := rayhead.ReadStatus(c.state)
	if err != nil || !ok {
		t.Fatalf("ray head status: %v %v", ok, err)
	}
	return st.Address
}

// rayHeadTLS are the Ray head's certificate and the cluster token, as
// `head up` wrote them into STATE/ray-head.
type rayHeadTLS struct {
	cert  *tls.Certificate
	token string
}

func rayHeadFilesOf(t *testing.T, state string) rayHeadTLS {
	t.Helper()
	dir := filepath.Join(state, "ray-head")
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "ray-head.crt"), filepath.Join(dir, "ray-head.key"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(dir, "cluster_token"))
	if err != nil {
		t.Fatal(err)
	}
	return rayHeadTLS{cert: &cert, token: strings.TrimSpace(string(tok))}
}

// headTargets are the listeners of this machine a stranger reaches at the
// head's IP (bound to it or to every address), each named by its owner:
// the Ray head's processes, the head itself, or another program of this
// machine (only reported). rayClient is the Ray Client server's address.
func (c *rayCluster) headTargets(t *testing.T) (out []target, rayClient string) {
	t.Helper()
	owner := map[netip.AddrPort]string{}
	headLs, err := listenports.Of("/", c.cmd.Process.Pid) // the Ray head is its child
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range headLs {
		owner[l.Addr] = "head: the docker provider's who-am-I DNS"
		if p := int(l.Addr.Port()); p == c.portA || p == c.portB {
			owner[l.Addr] = "head: port A or B"
		}
	}
	for _, l := range c.rayHeadListeners(t) {
		owner[l.Addr] = "Ray head: " + procName(l.PID)
		if strings.Contains(owner[l.Addr], "client") && strings.Contains(owner[l.Addr], "server") {
			rayClient = net.JoinHostPort(c.headIP, strconv.Itoa(int(l.Addr.Port())))
		}
	}
	head := netip.MustParseAddr(c.headIP)
	seen := map[int]bool{}
	// By address: IPv4 before IPv6, so 0.0.0.0:P names port P before [::]:P.
	// The head's own network namespace, not this test's /proc/self/net:
	// that is the main thread's, and a stranger's dial may have left the
	// main thread in the stranger's namespace (nsDial never switches back).
	for _, a := range containerListeners(t, c.cmd.Process.Pid) {
		ip := a.Addr().Unmap()
		if (!ip.IsUnspecified() && ip != head) || seen[int(a.Port())] {
			continue
		}
		seen[int(a.Port())] = true
		role, ours := owner[a]
		if !ours {
			role = "other: not the cluster's"
		}
		out = append(out, target{addr: net.JoinHostPort(c.headIP, strconv.Itoa(int(a.Port()))), role: role, connectOnly: !ours})
	}
	return out, rayClient
}

// waitRayHeadSettled waits until the Ray head runs with its GCS, raylet and
// Ray Client server listening and its ports unchanged for 5 s: on a busy
// machine Ray's head may restart once before it settles (its Ray Client
// server gives up waiting for its own node), and a probe then would see
// half a head.
func (c *rayCluster) waitRayHeadSettled(t *testing.T, limit time.Duration) {
	t.Helper()
	var last string
	since := time.Now()
	waitFor(t, limit, "the Ray head settled", func() (bool, string) {
		st, ok, err := rayhead.ReadStatus(c.state)
		if err != nil || !ok || st.State != rayhead.Running || st.PID == 0 {
			return false, fmt.Sprintf("%+v %v", st, err)
		}
		ls, err := listenports.Of("/", st.PID)
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, l := range ls {
			names = append(names, fmt.Sprintf("%d:%s", l.Addr.Port(), procName(l.PID)))
		}
		sort.Strings(names)
		now := strings.Join(names, " ")
		if now != last {
			last, since = now, time.Now()
		}
		all := strings.Contains(now, "gcs_server") && strings.Contains(now, "raylet") && strings.Contains(now, "client.server")
		return all && time.Since(since) >= 5*time.Second, now
	})
}

// metricsControl fails t unless some listener of the Ray head answers GET
// /metrics with 200 to the head's machine (the Prometheus servers the
// stranger must not reach are there for the cluster), and fails it if one
// that does is exposed (not loopback): head up puts them on loopback
// (issue 29). Some come up after the rest (Ray 2.52's autoscaler monitor),
// and a loaded machine answers slowly, so it asks every listener, at its
// own bound address, again for up to two minutes; a failure names what
// each one answered.
func (c *rayCluster) metricsControl(ctx context.Context, t *testing.T) {
	t.Helper()
	get := httpCall{method: "GET", path: "/metrics"}
	cl := client(hostDial, false, creds{})
	cl.Transport.(*http.Transport).ResponseHeaderTimeout = 15 * time.Second
	var seen []string
	ok := rvtest.Until(2*time.Minute, func() bool {
		seen = seen[:0]
		served := false
		for _, l := range c.rayHeadListeners(t) {
			a := get.do(ctx, cl, "http", dialable(l.Addr), "", "plain")
			seen = append(seen, fmt.Sprintf("%s (%s): %s", l.Addr, procName(l.PID), a))
			if a.status == http.StatusOK && strings.Contains(a.body, "# ") {
				if l.Exposed() {
					t.Errorf("%s (%s) serves /metrics on an exposed address: want loopback only", l.Addr, procName(l.PID))
				}
				t.Logf("control: %s (%s) serves /metrics to the head's machine", l.Addr, procName(l.PID))
				served = true
			}
		}
		if served {
			return true
		}
		time.Sleep(3 * time.Second)
		return false
	})
	if !ok {
		t.Errorf("no Ray head listener serves /metrics to the head's machine: the control has nothing to control; they answered:\n%s", strings.Join(seen, "\n"))
	}
}

// rayHeadListeners are the listeners of the Ray head's processes.
func (c *rayCluster) rayHeadListeners(t *testing.T) []listenports.Listener {
	t.Helper()
	st, ok, err := rayhead.ReadStatus(c.state)
	if err != nil || !ok || st.PID == 0 {
		t.Fatalf("ray head status: %+v %v %v", st, ok, err)
	}
	ls, err := listenports.Of("/", st.PID)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// procName is a process's program and script, for the log.
func procName(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return strconv.Itoa(pid)
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	name := filepath.Base(args[0])
	for _, a := range args[1:] {
		if strings.HasSuffix(a, ".py") || strings.HasPrefix(a, "ray.") {
			return name + " " + filepath.Base(a)
		}
	}
	return name
}

// nodeTargetsOf are a node's 64 ports at its public IP, each named by what
// Ray's command line (or the bundle's guest API port) gave it.
func nodeTargetsOf(t *testing.T, n wire.Node) []target {
	t.Helper()
	info, err := suite.eng.InspectContainer(context.Background(), n.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := vastnet.EndpointFrom(info.Config.Labels)
	if !ok || len(e.Ports) != 64 {
		t.Fatalf("node %s: endpoint %+v from its labels", n.InstanceID, e)
	}
	roles := rayPortRoles(t, info.ID)
	roles[n.GuestAPIPort] = "guest API"
	var out []target
	for _, p := range e.Ports {
		role := roles[p]
		if role == "" {
			role = "(unused)"
		}
		out = append(out, target{addr: net.JoinHostPort(n.PublicIP, strconv.Itoa(p)), role: role, guest: p == n.GuestAPIPort})
	}
	return out
}

// rayPortRoles reads the node's `ray start` command line: which of its
// ports is which Ray door.
func rayPortRoles(t *testing.T, containerID string) map[int]string {
	t.Helper()
	names := map[string]string{
		"--node-manager-port": "raylet (node manager)", "--object-manager-port": "object manager",
		"--runtime-env-agent-port": "runtime-env agent (HTTP)", "--dashboard-agent-grpc-port": "dashboard agent gRPC",
		"--dashboard-agent-listen-port": "dashboard agent HTTP (job agent)", "--metrics-export-port": "metrics export",
	}
	roles := map[int]string{}
	for _, cmd := range procsOf(t, containerID) {
		if !strings.Contains(cmd, "ray.scripts.scripts start") {
			continue
		}
		for _, f := range strings.Fields(cmd) {
			k, v, _ := strings.Cut(f, "=")
			if name, ok := names[k]; ok {
				p, _ := strconv.Atoi(v)
				roles[p] = name
			}
			if k == "--worker-port-list" {
				for _, w := range strings.Split(v, ",") {
					p, _ := strconv.Atoi(w)
					roles[p] = "worker port"
				}
			}
		}
		return roles
	}
	t.Fatalf("container %s: no ray start process", containerID)
	return nil
}

// rayClientCode is a Ray Client session: connect, run a task, print.
func rayClientCode(addr string) string {
	return fmt.Sprintf(`import ray, sys
try:
    ray.init("ray://%s")
    print("CLIENT-OK", ray.get(ray.remote(lambda: 42).remote()))
except BaseException as e:
    print("CLIENT-REFUSED", type(e).__name__, str(e)[-3000:])
    sys.exit(1)
`, addr)
}

// writeForeignTLS writes Ray's TLS files of a cluster of the stranger's
// own (another CA) and returns the env that makes Ray's client use them.
func writeForeignTLS(t *testing.T, dir string) []string {
	t.Helper()
	caPEM, certPEM, keyPEM := foreignPEMs(t, strangerIP)
	paths := map[string][]byte{"ca.crt": caPEM, "tls.crt": certPEM, "tls.key": keyPEM}
	for name, b := range paths {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"RAY_USE_TLS=1", "RAY_TLS_CA_CERT=" + filepath.Join(dir, "ca.crt"),
		"RAY_TLS_SERVER_CERT=" + filepath.Join(dir, "tls.crt"), "RAY_TLS_SERVER_KEY=" + filepath.Join(dir, "tls.key")}
}

// guestControl: the guest API answers Info to a token with guest:info from
// the app's own issuer (what the stranger lacks).
func guestControl(ctx context.Context, t *testing.T, st *statedir.State, nodes []wire.Node) {
	t.Helper()
	key, err := guestauth.DeriveEd25519(st.AppRootKey.Reveal(), guestauth.IssuerInfo)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := guestauth.Mint(key, guestauth.MintRequest{Iss: guestauth.InternalIssuer(st.AppID), Aud: []string{st.AppID},
		Scopes: []string{"guest:info"}, TTL: 10 * time.Minute, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	cl := client(hostDial, true, creds{})
	for _, n := range nodes {
		addr := net.JoinHostPort(n.PublicIP, strconv.Itoa(n.GuestAPIPort))
		info := httpCall{method: "GET", path: "/prpc/v1/Info"}
		if a := info.do(ctx, cl, "https", addr, tok, "guest:info token"); a.status != http.StatusOK {
			t.Errorf("guest API %s Info with a guest:info token: %s, want 200", addr, a)
		}
	}
}

// nodeInside: inside each node, where Ray binds them (loopback, by the
// shim), its metrics answer and its dashboard agent's HTTP answers with the
// token (and, Ray 2.60, only with it): the doors the stranger cannot reach
// exist and serve the node.
func nodeInside(ctx context.Context, t *testing.T, nodes []wire.Node, token, version string) {
	t.Helper()
	for _, n := range nodes {
		id := containerOf(t, n.InstanceID)
		roles := rayPortRoles(t, id)
		info, err := suite.eng.InspectContainer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		h, err := netns.GetFromPid(info.State.Pid)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		ls := containerListeners(t, info.State.Pid)
		var lines []string
		for _, a := range ls {
			lines = append(lines, fmt.Sprintf("%s (%s)", a, cmp(roles[int(a.Port())], "not one of the 64")))
		}
		t.Logf("node %s listens on: %s", n.InstanceID, strings.Join(lines, ", "))
		dial := nsDial(h)
		plain := client(dial, false, creds{})
		for _, a := range ls {
			switch roles[int(a.Port())] {
			case "metrics export":
				m := httpCall{method: "GET", path: "/metrics"}.do(ctx, plain, "http", dialable(a), "", "inside the node")
				if m.status != http.StatusOK {
					t.Errorf("node %s metrics at %s from inside: %s, want 200", n.InstanceID, a, m)
				}
			case "dashboard agent HTTP (job agent)":
				call := httpCall{method: "GET", path: "/api/job_agent/jobs/rayvast-none"}
				got := call.do(ctx, plain, "http", dialable(a), "", "no token")
				switch {
				case got.status == http.StatusUnauthorized:
				case version == rvtest.RayOldest:
					// Ray 2.52 asks no token there: loopback (the shim) is the
					// job agent's only guard.
					t.Logf("node %s job agent at %s from inside without the token: %s (Ray %s: no token auth on the job agent)", n.InstanceID, a, got, version)
				default:
					t.Errorf("node %s job agent at %s from inside without the token: %s, want 401", n.InstanceID, a, got)
				}
				if got := call.do(ctx, plain, "http", dialable(a), token, "the token"); got.err != nil || got.status == http.StatusUnauthorized {
					t.Errorf("node %s job agent at %s from inside with the token: %s, want an answer past auth", n.InstanceID, a, got)
				}
			}
		}
	}
}

func cmp(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// dialable is where to connect to reach a listener bound at a.
func dialable(a netip.AddrPort) string {
	if a.Addr().IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(a.Port())))
	}
	return a.String()
}

// containerListeners lists the TCP listeners of the network namespace of
// pid (a container's, or this process's), by address.
func containerListeners(t *testing.T, pid int) []netip.AddrPort {
	t.Helper()
	socks, err := listenports.Namespace("/", pid)
	if err != nil {
		t.Fatal(err)
	}
	out := slices.Collect(maps.Values(socks))
	slices.SortFunc(out, netip.AddrPort.Compare)
	return out
}

// checkNoSecret: the token the test used is in none of the head's logs.
func checkNoSecret(t *testing.T, c *rayCluster, token string) {
	t.Helper()
	logs := map[string]string{"head up output": c.out.String()}
	for _, f := range []string{"head.log", "ray-head.log"} {
		b, _ := os.ReadFile(filepath.Join(c.state, f))
		logs[f] = string(b)
	}
	for name, text := range logs {
		if token != "" && strings.Contains(text, token) {
			t.Errorf("%s holds the cluster token", name)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// dumpGuard logs the head's firewall table (its drop counters) and the
// nodes' Ray worker logs: why a job failed with the guard on.
func (c *rayCluster) dumpGuard(t *testing.T, nodes []wire.Node) {
	t.Helper()
	out, err := exec.Command("nft", "list", "table", "inet", tableOf(c.state)).CombinedOutput()
	t.Logf("head firewall (%v):\n%s", err, out)
	for _, n := range nodes {
		out, err := exec.Command("docker", "exec", n.InstanceID, "sh", "-c",
			"tail -n 15 /run/rayvast/ray/session_latest/logs/worker-*.err /run/rayvast/ray/session_latest/logs/python-core-worker-*.log 2>&1 | tail -n 120").CombinedOutput()
		t.Logf("node %s worker logs (%v):\n%s", n.InstanceID, err, out)
	}
}

// dumpRayClientLogs logs the tail of each Ray Client server log of the Ray
// head (the proxy's and each per-client server's): a session that fails
// says why only there.
func (c *rayCluster) dumpRayClientLogs(t *testing.T) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(rayhead.TempDir(c.state), "session_latest", "logs", "ray_client_server*"))
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		t.Logf("%s (last 4 KiB):\n%s", filepath.Base(p), b)
	}
}

// jobAPIControl: from this machine the Ray head's dashboard answers its job
// API with the cluster token and refuses it without (the token is what
// guards it from the machine's other users).
func (c *rayCluster) jobAPIControl(ctx context.Context, t *testing.T, token string) {
	t.Helper()
	jobs := httpCall{method: "GET", path: "/api/jobs/"}
	plain := client(hostDial, false, creds{})
	dashboards := 0
	for _, l := range c.rayHeadListeners(t) {
		if !strings.Contains(procName(l.PID), "dashboard.py") {
			continue
		}
		addr := dialable(l.Addr)
		if a := jobs.do(ctx, plain, "http", addr, token, "the token"); a.status != http.StatusOK || !strings.HasPrefix(a.body, "[") {
			continue // the dashboard's other listeners: its gRPC, its metrics
		}
		dashboards++
		t.Logf("job API of the Ray head at %s (its dashboard): 200 with the cluster token", addr)
		// The token is what guards the job API from the head machine's
		// other users (and everyone, were the firewall off).
		if a := jobs.do(ctx, plain, "http", addr, "", "no token"); a.status != http.StatusUnauthorized {
			t.Errorf("job API at %s on the head's machine without the token: %s, want 401", addr, a)
		}
	}
	if dashboards == 0 { // its port is chosen free (rayhead.PickPorts): always this Ray head's
		t.Error("the Ray head's dashboard does not answer the job API with the cluster token")
	}
}
