package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/rayhead/autoscaler"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

func upConfig(t *testing.T, dir, headAddr string) string {
	t.Helper()
	p := filepath.Join(dir, "cluster.json")
	cfg := `{"cluster":"uptest","ray":{"head_address":"` + headAddr + `"},
	 "node_types":{"cpu":{"gpus":0,"max_workers":2,"resources":{},"labels":{}}},
	 "guest_api":{},"provider":{"kind":"none","private_network":true}}`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rayAddr is a free loopback port for the stand-in Ray head's GCS, from the
// ephemeral range: Ray refuses a GCS port inside its worker ports
// (10002-19999 by default), as the stand-in does.
func rayAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// needFakeray points head up's Ray head at the stand-in ray package.
func needFakeray(t *testing.T, record string) {
	t.Helper()
	rvtest.NeedTools(t, "python3") // the stand-in Ray head is Python
	fr, _ := filepath.Abs("../test/fakeray")
	t.Setenv("PYTHONPATH", fr)
	t.Setenv("FAKERAY_RECORD", record)
}

type upProc struct {
	out, errOut *rvtest.Buffer
	cancel      context.CancelFunc
	code        chan int
}

func startUp(t *testing.T, args ...string) *upProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &upProc{out: &rvtest.Buffer{}, errOut: &rvtest.Buffer{}, cancel: cancel, code: make(chan int, 1)}
	go func() { r.code <- run(ctx, append([]string{"up"}, args...), r.out, r.errOut) }()
	t.Cleanup(cancel)
	return r
}

func (r *upProc) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	if !rvtest.Until(30*time.Second, func() bool {
		select {
		case c := <-r.code:
			t.Fatalf("head up exited %d waiting for %s:\n%s\n%s", c, what, r.out.String(), r.errOut.String())
		default:
		}
		return ok()
	}) {
		t.Fatalf("waited 30 s for %s:\n%s\n%s", what, r.out.String(), r.errOut.String())
	}
}

func (r *upProc) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case c := <-r.code:
		return c
	case <-time.After(30 * time.Second):
		t.Fatalf("head up did not stop:\n%s", r.out.String())
		return -1
	}
}

type fakerayRecord struct {
	Argv   []string          `json:"argv"`
	Env    map[string]string `json:"env"`
	Signal int               `json:"signal"`
}

func readFakeray(t *testing.T, path string) (fakerayRecord, bool) {
	var r fakerayRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return r, false
	}
	return r, json.Unmarshal(b, &r) == nil
}

// TestUp: a new state dir is made beside the config, the Ray head starts
// with the cluster's TLS files and token, the ports serve, Ctrl-C stops
// both and leaves the candidates; a second run reuses the state and, with
// --down-on-exit, ends them.
func TestUp(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "ray-record.json")
	needFakeray(t, record)
	addr := rayAddr(t)
	cfg := upConfig(t, dir, addr)
	state := filepath.Join(dir, "cluster.state")
	args := []string{"--config", cfg, "--agent", os.Args[0], "--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0"}

	r := startUp(t, args...)
	r.waitFor(t, "the Ray head", func() bool { _, ok := readFakeray(t, record); return ok })
	r.waitFor(t, "the live summary", func() bool { return strings.Contains(r.out.String(), "Ray head: running") })
	rec, _ := readFakeray(t, record)
	rs, _, _ := rayhead.ReadStatus(state)
	_, dash, _ := net.SplitHostPort(rs.Dashboard)
	p := rs.Ports
	if p == nil || strconv.Itoa(p.Dashboard) != dash {
		t.Fatalf("Ray head status: ports %+v, dashboard %s", p, rs.Dashboard)
	}
	// The stand-in is Ray 2.53: the GCS's store is head up's Redis, its
	// password a flag (issue 43), its address and the reconnect wait in
	// the env.
	pw, _ := os.ReadFile(filepath.Join(state, rayhead.StoreDir, "redis.password"))
	want := fmt.Sprintf("start --head --block --node-ip-address=127.0.0.1 --port=%s --disable-usage-stats --temp-dir=%s"+
		" --dashboard-port=%d --dashboard-agent-listen-port=%d --metrics-export-port=%d --ray-client-server-port=%d --num-cpus=0 --num-gpus=0 --redis-password=%s",
		addr[len("127.0.0.1:"):], rayhead.TempDir(state), p.Dashboard, p.DashboardAgentHTTP, p.MetricsExport, p.RayClient, bytes.TrimSpace(pw))
	if got := strings.Join(rec.Argv, " "); len(bytes.TrimSpace(pw)) == 0 || got != want {
		t.Errorf("Ray head argv\n%q, want\n%q", got, want)
	}
	if !strings.HasPrefix(rec.Env["RAY_REDIS_ADDRESS"], "127.0.0.1:") || rec.Env["RAY_gcs_rpc_server_reconnect_timeout_s"] != rayhead.GCSReconnectS {
		t.Errorf("Ray head env: RAY_REDIS_ADDRESS %q, RAY_gcs_rpc_server_reconnect_timeout_s %q", rec.Env["RAY_REDIS_ADDRESS"], rec.Env["RAY_gcs_rpc_server_reconnect_timeout_s"])
	}
	// The ports without a certificate stay on loopback (the shim) and the
	// metrics ports Ray has no flag for come from its environment.
	if rec.Env["NAT_SHIM"] != "127.0.0.1 127.0.0.1 0" || rec.Env["NAT_SHIM_LOOPBACK"] != fmt.Sprintf("%d,%d,%d,%d", p.DashboardAgentHTTP, p.MetricsExport, p.DashboardMetrics, p.AutoscalerMetrics) ||
		rec.Env["DASHBOARD_METRIC_PORT"] != strconv.Itoa(p.DashboardMetrics) || rec.Env["AUTOSCALER_METRIC_PORT"] != strconv.Itoa(p.AutoscalerMetrics) ||
		!strings.HasPrefix(rec.Env["PYTHONPATH"], filepath.Join(state, "ray-head", "shim")+":") {
		t.Errorf("Ray head env: NAT_SHIM %q NAT_SHIM_LOOPBACK %q DASHBOARD_METRIC_PORT %q AUTOSCALER_METRIC_PORT %q PYTHONPATH %q",
			rec.Env["NAT_SHIM"], rec.Env["NAT_SHIM_LOOPBACK"], rec.Env["DASHBOARD_METRIC_PORT"], rec.Env["AUTOSCALER_METRIC_PORT"], rec.Env["PYTHONPATH"])
	}
	tok, _ := os.ReadFile(rec.Env["RAY_AUTH_TOKEN_PATH"])
	secrets, _ := os.ReadFile(filepath.Join(state, "secrets.json"))
	if len(tok) == 0 || !bytes.Contains(secrets, tok) {
		t.Errorf("RAY_AUTH_TOKEN_PATH %s does not hold the cluster token", rec.Env["RAY_AUTH_TOKEN_PATH"])
	}
	if rec.Env["RAY_USE_TLS"] != "1" || rec.Env["RAY_CLOUD_INSTANCE_ID"] != rayhead.InstanceID || rec.Env["RAY_NODE_TYPE_NAME"] != rayhead.NodeTypeName {
		t.Errorf("Ray head env: %v", rec.Env)
	}
	admin := adminclient.Unix(filepath.Join(state, statedir.AdminSocket), 5*time.Second)
	created, err := admin.Create(context.Background(), wire.CandidateRequest{NodeType: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the candidate's line", func() bool { return strings.Contains(r.out.String(), "rental "+created.CandidateID+" (cpu): pending") })
	var st bytes.Buffer
	if code := run(context.Background(), []string{"status", "--state", state}, &st, &st); code != 0 || !strings.Contains(st.String(), "RAY HEAD  "+addr+"  running") {
		t.Errorf("head status (exit %d) lacks the Ray head:\n%s", code, st.String())
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("head up exit %d, want 0:\n%s", code, r.errOut.String())
	}
	if rec, _ := readFakeray(t, record); rec.Signal == 0 {
		t.Error("the Ray head was not stopped by a signal")
	}
	if s, _, _ := rayhead.ReadStatus(state); s.State != rayhead.Stopped {
		t.Errorf("Ray head state %q after exit, want stopped", s.State)
	}
	for _, want := range []string{"state: made " + state, "Ray head: running at " + addr, "listening: port A 127.0.0.1:",
		"rental " + created.CandidateID + " (cpu): pending", "Ray head: stopped", "rentals keep running until: head down --config"} {
		if !strings.Contains(r.out.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, r.out.String())
		}
	}

	// Again, with --down-on-exit: the state is reused, the candidate ended.
	r = startUp(t, append(args, "--down-on-exit")...)
	// The Ray head starts before the ports listen: wait for both, or a
	// Ctrl-C in between finds no admin API to end the candidate through.
	r.waitFor(t, "the live summary", func() bool {
		return strings.Contains(r.out.String(), "Ray head: running") && strings.Contains(r.out.String(), "listening: port A")
	})
	if code := r.stop(t); code != 0 {
		t.Fatalf("head up --down-on-exit exit %d:\n%s", code, r.errOut.String())
	}
	if !strings.Contains(r.out.String(), "state: "+state+" (existing)") || !strings.Contains(r.out.String(), "candidates ended: 1") {
		t.Errorf("second run:\n%s", r.out.String())
	}
}

func TestUpRefuses(t *testing.T) {
	dir := t.TempDir()
	cfg := upConfig(t, dir, "127.0.0.1:16379")
	state := filepath.Join(dir, "other.state")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"init", "--state", state, "--ip", "127.0.0.2"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"ray":{"head_address":"127.0.0.1:1"},"node_types":{"x":{"gpus":0,"max_workers":1,"resources":{},"labels":{}}},"guest_api":{},"provider":{"kind":"aws"}}`), 0o600)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no config", nil, "usage: head up"},
		{"invalid config", []string{"--config", bad}, `provider.kind: "aws"`},
		{"Ray head not on the head's IP", []string{"--config", cfg, "--state", state}, "not the state dir's head IP 127.0.0.2"},
		{"bad --ip", []string{"--config", cfg, "--ip", "localhost"}, "not an IP literal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), append([]string{"up"}, c.args...), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errb.String(), c.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, _ := os.ReadFile(os.Args[0])
	sum := sha256.Sum256(b)
	if !strings.Contains(out.String(), "head sha256:  "+hex.EncodeToString(sum[:])) || !strings.Contains(out.String(), "agent sha256: ") {
		t.Errorf("head version:\n%s", out.String())
	}
}

// TestUpNoRayHead: --no-ray-head starts no Ray head; the nodes join the
// one at ray.head_address.
func TestUpNoRayHead(t *testing.T) {
	dir := t.TempDir()
	cfg := upConfig(t, dir, "198.51.100.9:6379")
	t.Setenv("PYTHON", filepath.Join(dir, "no-python")) // would fail if it were run
	r := startUp(t, "--config", cfg, "--no-ray-head", "--ip", "127.0.0.1", "--agent", os.Args[0],
		"--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0")
	r.waitFor(t, "listening", func() bool { return strings.Contains(r.out.String(), "listening: port A") })
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.errOut.String())
	}
	if !strings.Contains(r.out.String(), "Ray head: run elsewhere, at 198.51.100.9:6379 (--no-ray-head)") {
		t.Errorf("progress:\n%s", r.out.String())
	}
	if _, ok, _ := rayhead.ReadStatus(filepath.Join(dir, "cluster.state")); ok {
		t.Error("a Ray head state file with --no-ray-head")
	}
}

// TestUpSecondOnSameState: a second head up on a state dir a head serves
// exits 1 (the state dir's lock) and, even with --down-on-exit, ends
// nothing of the running head's cluster.
func TestUpSecondOnSameState(t *testing.T) {
	dir := t.TempDir()
	needFakeray(t, filepath.Join(dir, "ray-record.json"))
	cfg := upConfig(t, dir, rayAddr(t))
	args := []string{"--config", cfg, "--agent", os.Args[0], "--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0"}
	first := startUp(t, args...)
	first.waitFor(t, "the live summary", func() bool { return strings.Contains(first.out.String(), "Ray head: running") })
	admin := adminclient.Unix(filepath.Join(dir, "cluster.state", statedir.AdminSocket), 5*time.Second)
	created, err := admin.Create(context.Background(), wire.CandidateRequest{NodeType: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), append([]string{"up", "--down-on-exit"}, args...), &out, &errb); code != 1 {
		t.Errorf("second head up: exit %d, want 1\n%s", code, errb.String())
	}
	if c, err := admin.Candidate(context.Background(), created.CandidateID); err != nil || c.State == wire.StateEnded {
		t.Errorf("the running head's candidate after a refused second up: %+v %v", c, err)
	}
	if code := first.stop(t); code != 0 {
		t.Errorf("first head up exit %d", code)
	}
}

// TestUpAutoscaler: with the config's autoscaler block, head up writes
// STATE/autoscaler.yaml (naming the admin socket and the idle timeout) and
// the plugin before the Ray head starts, and starts it with
// --autoscaling-config and the plugin's dir first on its PYTHONPATH (the
// PYTHONPATH head up had kept after it).
func TestUpAutoscaler(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "ray-record.json")
	needFakeray(t, record)
	addr := rayAddr(t)
	cfg := upConfig(t, dir, addr)
	b, _ := os.ReadFile(cfg)
	b = bytes.Replace(b, []byte(`"cluster":"uptest"`), []byte(`"cluster":"uptest","autoscaler":{"idle_timeout_minutes":0.5}`), 1)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "cluster.state")
	r := startUp(t, "--config", cfg, "--agent", os.Args[0], "--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0")
	r.waitFor(t, "the Ray head", func() bool { _, ok := readFakeray(t, record); return ok })
	rec, _ := readFakeray(t, record)
	yaml := filepath.Join(state, autoscaler.File)
	if got := rec.Argv[len(rec.Argv)-1]; got != "--autoscaling-config="+yaml {
		t.Errorf("Ray head argv %v: last is %q, want --autoscaling-config=%s", rec.Argv, got, yaml)
	}
	plugins := filepath.Join(state, autoscaler.PluginDir)
	fr, _ := filepath.Abs("../test/fakeray")
	if got, want := rec.Env["PYTHONPATH"], plugins+":"+filepath.Join(state, "ray-head", "shim")+":"+fr; got != want {
		t.Errorf("Ray head PYTHONPATH = %q, want %q", got, want)
	}
	if got := rec.Env["AUTOSCALER_HEARTBEAT_TIMEOUT_S"]; got != rayhead.HeartbeatTimeoutS {
		t.Errorf("Ray head AUTOSCALER_HEARTBEAT_TIMEOUT_S = %q, want %s", got, rayhead.HeartbeatTimeoutS)
	}
	plugin, err := os.ReadFile(filepath.Join(plugins, "rayvast_autoscaler.py"))
	if err != nil || !bytes.Contains(plugin, []byte("class RayvastNodeProvider")) {
		t.Errorf("plugin in the state dir: %v", err)
	}
	var as map[string]any
	y, err := os.ReadFile(yaml)
	if err == nil {
		_, body, _ := bytes.Cut(y, []byte("\n{"))
		err = json.Unmarshal(append([]byte("{"), body...), &as)
	}
	if err != nil {
		t.Fatalf("autoscaler.yaml: %v", err)
	}
	if as["idle_timeout_minutes"] != 0.5 || as["provider"].(map[string]any)["admin_socket"] != filepath.Join(state, statedir.AdminSocket) {
		t.Errorf("autoscaler.yaml: idle %v, provider %v", as["idle_timeout_minutes"], as["provider"])
	}
	// The stand-in refuses --autoscaling-config (it does not model Ray's
	// autoscaler; head/rayhead/autoscaler's and the e2e suite's real-Ray tests
	// run it), so its Ray head never says it started: wait for the ports.
	r.waitFor(t, "the ports", func() bool { return strings.Contains(r.out.String(), "listening: port A") })
	for _, want := range []string{"Ray autoscaler: on", "node types cpu have no cpus"} {
		if !strings.Contains(r.out.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, r.out.String())
		}
	}
	if code := r.stop(t); code != 0 {
		t.Fatalf("head up exit %d:\n%s", code, r.errOut.String())
	}
}
