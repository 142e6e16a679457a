package fakeray_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTreeOnLoopback: with a local node IP every child comes up as on a
// real node: the runtime-env agent binds (node IP, its port), the dashboard
// agent its gRPC, metrics and HTTP ports, the native raylet 0.0.0.0 on the
// node manager and object manager ports, and each native core worker binds
// its worker port and registers with the raylet at node IP:node manager
// port. Every child inherits Ray's environment.
func TestTreeOnLoopback(t *testing.T) {
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		t.Run(ip, func(t *testing.T) {
			n := newNode(t, ip, 3)
			f := run(t, "", append(secrets(t), "MARK=inherited"), nil, n.args()...)
			f.expect(t, "fakeray started")
			r := f.record(t)
			if len(r.Problems) > 0 || !r.Started {
				t.Fatalf("started %v, problems %q", r.Started, r.Problems)
			}
			local := "127.0.0.1"
			if ip != local {
				local = "0.0.0.0" // Ray binds gRPC to all interfaces unless the node IP is local-host
			}
			wantBinds := map[string][]string{
				"runtime_env_agent": {ip + ":" + itoa(n.rea)},
				"raylet":            {"0.0.0.0:" + itoa(n.nm), "0.0.0.0:" + itoa(n.om)},
				"dashboard_agent":   {local + ":" + itoa(n.dagrpc), local + ":" + itoa(n.metric), ip + ":" + itoa(n.dahttp)},
			}
			if ip != "127.0.0.1" {
				wantBinds["dashboard_agent"] = append(wantBinds["dashboard_agent"], "127.0.0.1:"+itoa(n.dahttp))
			}
			for name, want := range wantBinds {
				var got []string
				for _, b := range r.Children[name].Binds {
					if b.Result != b.Addr+":"+itoa(b.Port) {
						t.Errorf("%s asked %s:%d, bound %s", name, b.Addr, b.Port, b.Result)
					}
					got = append(got, b.Result) // where the socket really is
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s binds %q, want %q", name, got, want)
				}
			}
			raylet := r.Children["raylet"]
			if c := raylet.AgentConn; c == nil || !c.OK || c.Addr != ip || c.Port != n.rea {
				t.Errorf("raylet → runtime-env agent: %+v, want ok to %s:%d", c, ip, n.rea)
			}
			if len(raylet.WorkerConn) != n.cpus {
				t.Errorf("raylet → workers: %+v, want %d connects", raylet.WorkerConn, n.cpus)
			}
			for _, c := range raylet.WorkerConn {
				if !c.OK || c.Addr != ip || !slices.Contains(n.workers, c.Port) {
					t.Errorf("raylet → worker %+v, want ok to %s on a worker port", c, ip)
				}
			}
			for i := range n.cpus {
				w := r.Children["core_worker_"+itoa(i)]
				if w.Connect == nil || !w.Connect.OK || w.Connect.Addr != ip || w.Connect.Port != n.nm || !w.Registered {
					t.Errorf("core_worker_%d: connect %+v registered %v, want %s:%d", i, w.Connect, w.Registered, ip, n.nm)
				}
				if len(w.Binds) != 1 || w.Binds[0].Addr != "0.0.0.0" || !slices.Contains(n.workers, w.Binds[0].Port) {
					t.Errorf("core_worker_%d binds %+v, want 0.0.0.0 on a worker port", i, w.Binds)
				}
				if w.PPID != raylet.PID {
					t.Errorf("core_worker_%d ppid %d, want the raylet %d", i, w.PPID, raylet.PID)
				}
			}
			for name, ch := range r.Children {
				if ch.Env["MARK"] != "inherited" || ch.Env["RAY_AUTH_TOKEN_PATH"] == "" {
					t.Errorf("%s env lacks Ray's environment: MARK=%q", name, ch.Env["MARK"])
				}
			}
			if !strings.HasSuffix(raylet.Argv[0], "/ray/core/src/ray/raylet/raylet") || elfMagic(t, raylet.Argv[0]) != "\x7fELF" {
				t.Errorf("raylet %q is not the native program", raylet.Argv[0])
			}
			if r.Node.NodeName != "c-123" || r.Node.Auth != "RAY_AUTH_TOKEN_PATH" || !r.Node.TLS {
				t.Errorf("node %+v", r.Node)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func elfMagic(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 4 {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b[:4])
}

// TestDashboardHTTPOff: when the dashboard agent's HTTP port is taken on
// 127.0.0.1, its HTTP server goes off after Ray's retries and the node runs
// on silently (Ray's http_server_agent), recorded as a problem.
func TestDashboardHTTPOff(t *testing.T) {
	n := newNode(t, "127.0.0.2", 2)
	l, err := net.Listen("tcp", "127.0.0.1:"+itoa(n.dahttp))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := run(t, "", secrets(t), nil, n.args()...)
	f.expect(t, "fakeray started")
	r := f.record(t)
	da := r.Children["dashboard_agent"]
	if da.HTTP != "off" || !slices.Contains(r.Problems, "dashboard_agent: HTTP server off") {
		t.Errorf("http_server %q problems %q, want off", da.HTTP, r.Problems)
	}
	inUse := 0
	for _, b := range da.Binds {
		if b.ErrnoName == "EADDRINUSE" {
			inUse++
		}
	}
	if inUse != 6 { // the first attempt and 5 retries
		t.Errorf("%d EADDRINUSE binds, want 6: %+v", inUse, da.Binds)
	}
	time.Sleep(300 * time.Millisecond)
	if f.cmd.ProcessState != nil {
		t.Fatal("ray start exited: the HTTP server off must not be fatal")
	}
}

// TestNodeIPNotLocal: in a network namespace with only loopback (nothing
// can leave it), node IP 203.0.113.7 is on no interface, as on vast: the
// runtime-env agent's bind fails with EADDRNOTAVAIL, the raylet fate-shares
// with it, and `ray start --block` exits 1.
func TestNodeIPNotLocal(t *testing.T) {
	needRoot(t, "a network namespace with no route out")
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("unshare (util-linux) missing: %v", err)
	}
	n := newNode(t, "203.0.113.7", 2)
	wrap := []string{"unshare", "--net", "sh", "-c", `ip link set lo up && exec "$@"`, "sh"}
	f := run(t, "", secrets(t), wrap, n.args()...)
	if got := f.wait(t); got != 1 {
		t.Errorf("exit code %d, want 1", got)
	}
	r := f.record(t)
	rea := r.Children["runtime_env_agent"]
	if len(rea.Binds) != 1 || rea.Binds[0].OK || rea.Binds[0].ErrnoName != "EADDRNOTAVAIL" || rea.Binds[0].Addr != "203.0.113.7" {
		t.Errorf("runtime-env agent binds %+v, want EADDRNOTAVAIL on 203.0.113.7", rea.Binds)
	}
	if r.Exits["raylet"] != 1 || !strings.Contains(r.Children["raylet"].ExitReason, "fate shares") {
		t.Errorf("unexpected exits %v, raylet %q: want the raylet's fate-share exit 1", r.Exits, r.Children["raylet"].ExitReason)
	}
	if r.Started {
		t.Error("recorded as started")
	}
}

// TestNoAvailablePorts: every leased worker takes a free port of
// --worker-port-list; with more CPUs than free ports the raylet says "No
// available ports" (Ray's worker_pool.cc). A port someone else holds is
// not free (Ray's CheckPortFree).
func TestNoAvailablePorts(t *testing.T) {
	n := newNode(t, "127.0.0.1", 3)
	n.cpus = 3
	held, err := net.Listen("tcp", "0.0.0.0:"+itoa(n.workers[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	f := run(t, "", secrets(t), nil, n.args()...)
	f.expect(t, "fakeray started")
	r := f.record(t)
	if r.Children["raylet"].NoPorts != 1 || !slices.Contains(r.Problems, "raylet: No available ports (1 workers)") {
		t.Errorf("no_available_ports %d problems %q, want 1", r.Children["raylet"].NoPorts, r.Problems)
	}
	for _, k := range r.Children["raylet"].Children {
		if k.Port == n.workers[0] {
			t.Errorf("%s got the held port %d", k.Name, k.Port)
		}
	}
}

// TestHeadForm: `head up`'s command starts the GCS on --port (all
// interfaces) beside the raylet.
func TestHeadForm(t *testing.T) {
	p := ports(t, 1)[0]
	temp, _ := os.MkdirTemp("", "fr")
	defer os.RemoveAll(temp)
	f := run(t, "", secrets(t), nil, "start", "--head", "--block", "--node-ip-address=127.0.0.1", "--port="+itoa(p),
		"--disable-usage-stats", "--num-cpus=1", "--temp-dir="+temp)
	f.expect(t, "fakeray started")
	r := f.record(t)
	g := r.Children["gcs_server"]
	if len(g.Binds) != 1 || !g.Binds[0].OK || g.Binds[0].Addr != "0.0.0.0" || g.Binds[0].Port != p {
		t.Errorf("gcs_server binds %+v, want 0.0.0.0:%d", g.Binds, p)
	}
	if len(r.Problems) > 0 {
		t.Errorf("problems %q", r.Problems)
	}
	d := r.Children["dashboard"]
	if len(d.Binds) == 0 || !d.Binds[len(d.Binds)-1].OK || d.Binds[0].Addr != "127.0.0.1" || d.Binds[0].Port != 8265 {
		t.Errorf("dashboard binds %+v, want 127.0.0.1 from 8265 up", d.Binds)
	}
}

// TestHeadDashboardPortTaken: an explicit --dashboard-port that is taken
// fails `ray start --head` (exit 1); --include-dashboard=false starts none.
func TestHeadDashboardPortTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := itoa(l.Addr().(*net.TCPAddr).Port)
	temp, _ := os.MkdirTemp("", "fr")
	defer os.RemoveAll(temp)
	head := []string{"start", "--head", "--block", "--node-ip-address=127.0.0.1", "--port=" + itoa(ports(t, 1)[0]), "--num-cpus=1", "--temp-dir=" + temp}
	f := run(t, "", secrets(t), nil, append(head, "--dashboard-port="+taken)...)
	if code := f.wait(t); code != 1 || !strings.Contains(f.record(t).Error, "already occupied") {
		t.Errorf("exit %d error %q, want 1: dashboard port taken", code, f.record(t).Error)
	}
	f = run(t, "", secrets(t), nil, append(head, "--dashboard-port="+taken, "--include-dashboard=false")...)
	f.expect(t, "fakeray started")
	if _, ok := f.record(t).Children["dashboard"]; ok {
		t.Error("a dashboard started with --include-dashboard=false")
	}
}

// TestPreloadReachesNatives: an LD_PRELOAD library in Ray's environment
// reaches the native raylet and core workers through the tree and sees
// their connect() calls: with node IP 127.0.0.9 and a library sending
// connects to 127.0.0.9 to 127.0.0.1, where nothing listens for them, the
// core workers' and the raylet's connects end on 127.0.0.1 and fail there.
func TestPreloadReachesNatives(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatalf("cc missing (the natives need it too): %v", err)
	}
	lib := filepath.Join(t.TempDir(), "rewrite.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "testdata/rewrite.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v: %s", lib, err, out)
	}
	n := newNode(t, "127.0.0.9", 2)
	f := run(t, "", append(secrets(t), "LD_PRELOAD="+lib), nil, n.args()...)
	f.expect(t, "fakeray started")
	r := f.record(t)
	w := r.Children["core_worker_0"]
	if w.Env["LD_PRELOAD"] != lib {
		t.Errorf("core worker LD_PRELOAD %q, want %q", w.Env["LD_PRELOAD"], lib)
	}
	// The raylet listens on 0.0.0.0, so the rewritten connect still lands.
	if w.Connect == nil || w.Connect.Addr != "127.0.0.9" || w.Connect.Result != "127.0.0.1:"+itoa(n.nm) || !w.Registered {
		t.Errorf("core worker connect %+v registered %v, want 127.0.0.9 rewritten to 127.0.0.1:%d", w.Connect, w.Registered, n.nm)
	}
	for _, c := range r.Children["raylet"].WorkerConn {
		if !c.OK || c.Result != "127.0.0.1:"+itoa(c.Port) {
			t.Errorf("raylet → worker %+v, want 127.0.0.9 rewritten to 127.0.0.1", c)
		}
	}
	// The runtime-env agent listens on 127.0.0.9 only: the raylet's
	// rewritten connect is refused.
	if c := r.Children["raylet"].AgentConn; c == nil || c.OK || c.ErrnoName != "ECONNREFUSED" {
		t.Errorf("raylet → runtime-env agent %+v, want ECONNREFUSED after the rewrite", c)
	}
	if !slices.Contains(r.Problems, "raylet: connect 127.0.0.9:"+itoa(n.rea)+": ECONNREFUSED") {
		t.Errorf("problems %q lack the raylet's refused connect", r.Problems)
	}
}
