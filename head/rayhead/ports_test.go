package rayhead

import (
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestPickPorts: Ray's defaults when free; a taken one moves to the next
// free port (another cluster's Ray head holds it), none twice, none the
// GCS port; none free at all names the port that has none.
func TestPickPorts(t *testing.T) {
	all := func(int) bool { return true }
	p, err := PickPorts(6379, all)
	if err != nil {
		t.Fatal(err)
	}
	want := Ports{GCS: 6379, Dashboard: 8265, DashboardAgentHTTP: 52365, MetricsExport: 44237, DashboardMetrics: 44227, AutoscalerMetrics: 44217, RayClient: 10001}
	if p != want {
		t.Errorf("all free: %+v, want Ray's defaults %+v", p, want)
	}
	// A second cluster: the first one's ports are taken.
	held := []int{6379, 8265, 52365, 44237, 44227, 44217, 10001, 52366}
	q, err := PickPorts(6380, func(port int) bool { return !slices.Contains(held, port) })
	if err != nil {
		t.Fatal(err)
	}
	got := []int{q.GCS, q.Dashboard, q.DashboardAgentHTTP, q.MetricsExport, q.DashboardMetrics, q.AutoscalerMetrics, q.RayClient}
	for i, port := range got {
		if slices.Contains(held, port) || slices.Contains(got[i+1:], port) {
			t.Errorf("second cluster's ports %+v: %d is taken or twice", q, port)
		}
	}
	if q.Dashboard != 8266 || q.DashboardAgentHTTP != 52367 || q.RayClient != 10000 {
		t.Errorf("second cluster's ports %+v: want the next free after each default (Ray Client downward)", q)
	}
	if _, err := PickPorts(6379, func(int) bool { return false }); err == nil || !strings.Contains(err.Error(), "dashboard") {
		t.Errorf("nothing free: %v, want an error naming the dashboard port", err)
	}
}

// TestPortFree: a port a listener holds on any address is not free.
func TestPortFree(t *testing.T) {
	l, err := listenAny()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if PortFree(l.port) {
		t.Errorf("port %d held on 127.0.0.2 reported free", l.port)
	}
}

// TestPortsEnv: the metrics ports Ray reads from its environment, the
// shim's loopback rule for the head's IP, the shim dir first on PYTHONPATH.
func TestPortsEnv(t *testing.T) {
	p := Ports{GCS: 6379, Dashboard: 8265, DashboardAgentHTTP: 52365, MetricsExport: 44237, DashboardMetrics: 44227, AutoscalerMetrics: 44217, RayClient: 10001}
	env := PortsEnv([]string{"PYTHONPATH=/x", "NAT_SHIM=stale"}, p, "10.0.0.1", "/s/shim")
	for _, want := range []string{"DASHBOARD_METRIC_PORT=44227", "AUTOSCALER_METRIC_PORT=44217", "NAT_SHIM=10.0.0.1 10.0.0.1 0",
		"NAT_SHIM_LOOPBACK=52365,44237,44227,44217", "PYTHONPATH=/s/shim:/x"} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %q: %q", want, env)
		}
	}
	if slices.Contains(env, "NAT_SHIM=stale") {
		t.Errorf("env kept the old NAT_SHIM: %q", env)
	}
	argv := strings.Join(WithPorts([]string{"ray"}, p), " ")
	if argv != "ray --dashboard-port=8265 --dashboard-agent-listen-port=52365 --metrics-export-port=44237 --ray-client-server-port=10001" {
		t.Errorf("argv %q", argv)
	}
}

// TestWithResources: no CPUs or GPUs on the Ray head unless named; custom
// resources as Ray's JSON.
func TestWithResources(t *testing.T) {
	if got := strings.Join(WithResources([]string{"ray"}, nil), " "); got != "ray --num-cpus=0 --num-gpus=0" {
		t.Errorf("no head_resources: %q", got)
	}
	got := strings.Join(WithResources([]string{"ray"}, map[string]float64{"CPU": 2, "head": 1, "a": 3}), " ")
	if got != `ray --num-cpus=2 --num-gpus=0 --resources={"a":3,"head":1}` {
		t.Errorf("head_resources: %q", got)
	}
}

// TestTempDirIgnoresTMPDIR: a long TMPDIR (60 characters) leaves the Ray
// head's temp dir short, and CheckTempDir refuses one too long for Ray's
// sockets, saying why.
func TestTempDirIgnoresTMPDIR(t *testing.T) {
	t.Setenv("TMPDIR", "/"+strings.Repeat("t", 59))
	d := TempDir("/srv/a/cluster.state")
	if !strings.HasPrefix(d, "/tmp/rv-") || CheckTempDir(d) != nil {
		t.Errorf("TempDir with a 60-char TMPDIR: %q (%v), want /tmp/rv-… that fits", d, CheckTempDir(d))
	}
	if err := CheckTempDir("/" + strings.Repeat("x", MaxTempDir)); err == nil || !strings.Contains(err.Error(), "107") {
		t.Errorf("CheckTempDir of %d bytes: %v, want a refusal naming AF_UNIX's 107", MaxTempDir+1, err)
	}
}

// TestFailingSameWayReported: a Ray head that exits before it comes up the
// same way again is reported with its own last words (OnFailing and the
// status file); the count grows with each such run.
func TestFailingSameWayReported(t *testing.T) {
	var mu sync.Mutex
	var calls []int
	var words string
	s, dir := newSup(t, "exit", func(c *Config) {
		c.OnFailing = func(n int, w string) { mu.Lock(); calls = append(calls, n); words = w; mu.Unlock() }
	})
	stop := supervise(t, s)
	ok := rvtest.Until(20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) >= 2 })
	st, _, _ := ReadStatus(dir)
	stop()
	mu.Lock()
	defer mu.Unlock()
	if !ok || calls[0] != 2 || calls[1] != 3 {
		t.Fatalf("OnFailing calls %v, want 2, 3, …", calls)
	}
	if words != "child ran" || !strings.Contains(st.LastWords, "child ran") || st.Failing < 2 {
		t.Errorf("last words %q, status %+v: want Ray's own last line", words, st)
	}
}

type anyListener struct {
	close func() error
	port  int
}

func (l anyListener) Close() error { return l.close() }

// listenAny holds a port on 127.0.0.2 only.
func listenAny() (anyListener, error) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		return anyListener{}, err
	}
	return anyListener{close: ln.Close, port: ln.Addr().(*net.TCPAddr).Port}, nil
}
