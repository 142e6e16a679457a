package rayhead

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// The test binary re-runs itself as the "Ray head" (os/exec's pattern):
// RAYHEAD_CHILD=exit exits 3 at once, =block says Ray's started line and
// blocks until signalled, =silent blocks without it, =up-exit says the
// started line, then exits 1 (a GCS that died after coming up).
func TestMain(m *testing.M) {
	switch os.Getenv("RAYHEAD_CHILD") {
	case "exit":
		os.Stdout.WriteString("child ran\n")
		os.Exit(3)
	case "block":
		os.Stdout.WriteString("child blocking\n--------------------\nRay runtime started.\n")
		time.Sleep(time.Hour)
		os.Exit(0)
	case "silent":
		os.Stdout.WriteString("child starting\n")
		time.Sleep(time.Hour)
		os.Exit(0)
	case "up-exit":
		os.Stdout.WriteString("Ray runtime started.\n")
		time.Sleep(50 * time.Millisecond)
		os.Exit(1)
	case "leave":
		// A Ray head that dies and leaves a process of its group behind
		// (Ray's dashboard), whose pid goes to RAYHEAD_PIDS.
		gc := exec.Command(os.Args[0])
		gc.Env = append(os.Environ(), "RAYHEAD_CHILD=silent")
		if err := gc.Start(); err != nil {
			os.Exit(2)
		}
		f, _ := os.OpenFile(os.Getenv("RAYHEAD_PIDS"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		fmt.Fprintln(f, gc.Process.Pid)
		f.Close()
		os.Stdout.WriteString("Ray runtime started.\n")
		time.Sleep(100 * time.Millisecond)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func newSup(t *testing.T, mode string, opts ...func(*Config)) (*Supervisor, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{Command: []string{os.Args[0]}, Env: append(os.Environ(), "RAYHEAD_CHILD="+mode),
		Address: "127.0.0.1:6379", LogPath: filepath.Join(dir, "ray-head.log"), StatePath: filepath.Join(dir, StateFile),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, StopGrace: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestRestartsWithBackoffAndKeepsLog(t *testing.T) {
	s, dir := newSup(t, "exit")
	stop := supervise(t, s)
	if !rvtest.Until(20*time.Second, func() bool { return s.Status().Restarts >= 3 }) {
		t.Fatalf("restarts = %d after 20 s, want 3", s.Status().Restarts)
	}
	stop()
	st, ok, err := ReadStatus(dir)
	if err != nil || !ok {
		t.Fatalf("ReadStatus: %v %v", ok, err)
	}
	if st.State != Stopped || st.Restarts < 3 || !strings.Contains(st.LastExit, "exit status 3") {
		t.Errorf("status = %+v, want stopped, ≥3 restarts, last exit 3", st)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "ray-head.log"))
	if n := strings.Count(string(b), "child ran"); n < 3 {
		t.Errorf("log has %d runs, want ≥3 (appended, not truncated):\n%s", n, b)
	}
}

func TestStopsProcessOnCancel(t *testing.T) {
	s, dir := newSup(t, "block")
	r, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	pid := s.Status().PID
	if !rvtest.Until(10*time.Second, func() bool { st, _, _ := ReadStatus(dir); return st.State == Running }) {
		t.Fatalf("status never running: %+v", s.Status())
	}
	if st, _, _ := ReadStatus(dir); st.State != Running || st.PID != pid || pid == 0 {
		t.Fatalf("status file = %+v, want running pid %d", st, pid)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Wait(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after cancel")
	}
	if err := exec.Command("kill", "-0", itoa(pid)).Run(); err == nil {
		t.Errorf("pid %d still alive after stop", pid)
	}
	if s.Status().Restarts != 0 {
		t.Errorf("restarts = %d, want 0 (a stop is not a crash)", s.Status().Restarts)
	}
}

func TestStartFailsForMissingBinary(t *testing.T) {
	dir := t.TempDir()
	s, _ := New(Config{Command: []string{filepath.Join(dir, "no-such-python")}, LogPath: filepath.Join(dir, "l")})
	if _, err := s.Start(); err == nil {
		t.Fatal("Start of a missing binary: no error")
	}
}

func TestCommandAndEnv(t *testing.T) {
	got := strings.Join(Command("python3", "10.0.0.1:6379", "/tmp/rayvast-0123456789ab"), " ")
	want := "python3 -m ray.scripts.scripts start --head --block --node-ip-address=10.0.0.1 --port=6379 --disable-usage-stats --temp-dir=/tmp/rayvast-0123456789ab"
	if got != want {
		t.Errorf("Command = %q, want %q", got, want)
	}
	env := Env([]string{"PATH=/bin", "RAY_AUTH_MODE=disabled", "RAY_AUTH_TOKEN=leak"}, Files{CA: "/s/ca.crt", Cert: "/s/c", Key: "/s/k", Token: "/s/t"}, "/v/bin/python")
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			t.Errorf("%s twice in env", k)
		}
		m[k] = v
	}
	if _, ok := m["RAY_AUTH_TOKEN"]; ok {
		t.Error("RAY_AUTH_TOKEN kept: the token's value would be in the Ray head's env")
	}
	// the venv's bin first: `ray job submit -- python3 job.py` runs the cluster's Python
	for k, v := range map[string]string{"PATH": "/v/bin:/bin", "RAY_AUTH_MODE": "token", "RAY_USE_TLS": "1", "RAY_TLS_CA_CERT": "/s/ca.crt",
		"RAY_TLS_SERVER_CERT": "/s/c", "RAY_TLS_SERVER_KEY": "/s/k", "RAY_AUTH_TOKEN_PATH": "/s/t",
		"RAY_CLOUD_INSTANCE_ID": InstanceID, "RAY_NODE_TYPE_NAME": NodeTypeName} {
		if m[k] != v {
			t.Errorf("env %s = %q, want %q", k, m[k], v)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestAutoscalerCommand: with Ray's autoscaler on, the Ray head gets
// --autoscaling-config and the plugin's dir first on its PYTHONPATH, the
// PYTHONPATH it had kept after it.
func TestAutoscalerCommand(t *testing.T) {
	argv := WithAutoscaler(Command("py", "10.0.0.1:6379", "/tmp/rv"), "/s/autoscaler.yaml")
	if got := argv[len(argv)-1]; got != "--autoscaling-config=/s/autoscaler.yaml" {
		t.Errorf("last arg = %q, want --autoscaling-config=/s/autoscaler.yaml", got)
	}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"A=1"}, "PYTHONPATH=/s/plugin"},
		{[]string{"PYTHONPATH=/fake", "A=1"}, "PYTHONPATH=/s/plugin:/fake"},
		{[]string{"PYTHONPATH="}, "PYTHONPATH=/s/plugin"},
	} {
		got := WithPythonPath(c.env, "/s/plugin")
		n := 0
		for _, kv := range got {
			if strings.HasPrefix(kv, "PYTHONPATH=") {
				n++
				if kv != c.want {
					t.Errorf("%v: %s, want %s", c.env, kv, c.want)
				}
			}
		}
		if n != 1 {
			t.Errorf("%v: %d PYTHONPATH entries, want 1: %v", c.env, n, got)
		}
	}
}

// TestAutoscalerEnv: the autoscaler's Ray head gets a heartbeat timeout
// long enough for a just-enrolled node's Ray to join, unless head up's
// environment names its own.
func TestAutoscalerEnv(t *testing.T) {
	got := AutoscalerEnv([]string{"A=1"}, "/p")
	if want := "AUTOSCALER_HEARTBEAT_TIMEOUT_S=" + HeartbeatTimeoutS; !slices.Contains(got, want) || !slices.Contains(got, "PYTHONPATH=/p") {
		t.Errorf("AutoscalerEnv = %v, want %s and PYTHONPATH=/p", got, want)
	}
	got = AutoscalerEnv([]string{"AUTOSCALER_HEARTBEAT_TIMEOUT_S=60"}, "/p")
	if n := len(slices.DeleteFunc(slices.Clone(got), func(kv string) bool { return !strings.HasPrefix(kv, "AUTOSCALER_HEARTBEAT_TIMEOUT_S=") })); n != 1 || !slices.Contains(got, "AUTOSCALER_HEARTBEAT_TIMEOUT_S=60") {
		t.Errorf("with the user's 60: %v", got)
	}
}

// TestStartingUntilRayStarted proves the Ray head is "starting" (and named
// to no node) until `ray start` says its runtime started, then "running"
// with an ID of its own: the nodes must not be told of a Ray head whose GCS
// does not answer yet.
func TestStartingUntilRayStarted(t *testing.T) {
	for _, c := range []struct {
		mode string
		want string
	}{{"silent", Starting}, {"block", Running}} {
		t.Run(c.mode, func(t *testing.T) {
			s, _ := newSup(t, c.mode)
			stop := supervise(t, s)
			defer stop()
			rvtest.Until(2*time.Second, func() bool { return s.Status().State == Running })
			st := s.Status()
			id, ok := s.Current()
			if st.State != c.want || st.ID == "" || id != st.ID || ok != (c.want == Running) {
				t.Errorf("status %+v, Current %q %v; want state %s and an ID, named only when running", st, id, ok, c.want)
			}
		})
	}
}

// TestRestartsAtOnceAfterComingUp proves a Ray head that came up and then
// died (its GCS killed) is started again at once, not after a backoff, with
// a new ID; one that never came up still backs off (here an hour, so it
// would not restart within the test).
func TestRestartsAtOnceAfterComingUp(t *testing.T) {
	slow := func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour }
	s, _ := newSup(t, "up-exit", slow)
	stop := supervise(t, s)
	ids := map[string]bool{}
	if !rvtest.Until(20*time.Second, func() bool {
		if id := s.Status().ID; id != "" {
			ids[id] = true
		}
		return s.Status().Restarts >= 3
	}) {
		t.Errorf("restarts = %d after 20 s with a 1 h backoff, want 3 at once", s.Status().Restarts)
	}
	if len(ids) < 2 {
		t.Errorf("IDs seen %v, want a new one per start", ids)
	}
	stop()

	s2, _ := newSup(t, "exit", slow)
	stop2 := supervise(t, s2)
	time.Sleep(500 * time.Millisecond) // a wrong "at once" would restart it many times here
	if n := s2.Status().Restarts; n != 1 {
		t.Errorf("a Ray head that never came up: %d restarts within 0.5 s, want 1 (then the 1 h backoff)", n)
	}
	stop2()
}

// TestStaleClusterFileRemoved proves the Ray head's ray_current_cluster is
// gone before each start: with it, and a node's raylet on this machine
// naming the same GCS address, `ray start --head` refuses "already running".
func TestStaleClusterFileRemoved(t *testing.T) {
	tmp := t.TempDir()
	stale := filepath.Join(tmp, "ray_current_cluster")
	if err := os.WriteFile(stale, []byte("127.0.0.1:6379"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := newSup(t, "block", func(c *Config) { c.TempDir = tmp })
	stop := supervise(t, s)
	defer stop()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("ray_current_cluster after start: %v, want removed", err)
	}
}

// TestTempDirShortAndOwn: one temp dir per state dir, short enough for
// Ray's Unix socket paths (under 107 bytes with a session dir inside).
func TestTempDirShortAndOwn(t *testing.T) {
	a, b := TempDir("/srv/a/cluster.state"), TempDir("/srv/b/cluster.state")
	if a == b || a != TempDir("/srv/a/cluster.state") {
		t.Errorf("TempDir: %q and %q, want one stable dir per state dir", a, b)
	}
	sock := filepath.Join(a, "session_2026-12-02_00-25-21_123456_1234567", "sockets", "plasma_store")
	if len(sock) >= 107 {
		t.Errorf("socket path %q is %d bytes, want < 107", sock, len(sock))
	}
}

// TestRestartEndsLeftovers proves a Ray head's leftovers in its process
// group (its dashboard, holding 127.0.0.1:8265) are gone before the next
// Ray head starts: with them there, the next one's dashboard cannot bind
// and `ray start --head` waits 60 s for it.
func TestRestartEndsLeftovers(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	var s *Supervisor
	s, _ = newSup(t, "leave", func(c *Config) {
		c.Env = append(c.Env, "RAYHEAD_PIDS="+pids)
	})
	stop := supervise(t, s)
	defer stop()
	if !rvtest.Until(20*time.Second, func() bool { return s.Status().Restarts >= 2 }) {
		t.Fatalf("restarts = %d, want 2", s.Status().Restarts)
	}
	b, _ := os.ReadFile(pids)
	lines := strings.Fields(string(b))
	if len(lines) < 2 {
		t.Fatalf("leftover pids %q, want one per run", lines)
	}
	first, _ := strconv.Atoi(lines[0])
	// By the second run's start, the first run's leftover must be gone.
	if err := exec.Command("kill", "-0", itoa(first)).Run(); err == nil {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", first)); !strings.Contains(string(st), ") Z ") {
			t.Errorf("the first Ray head's leftover %d still runs after the restart", first)
		}
	}
}

// TestRelaunchMakesEachRestartAnew proves a restart starts with what
// Relaunch makes, not the first run's command: a first run that fails
// (as a Ray head does when another cluster's took a port it chose) is
// followed by one with Relaunch's environment, which comes up, and the
// status names Relaunch's ports and dashboard (head run reads them there).
func TestRelaunchMakesEachRestartAnew(t *testing.T) {
	relaunched := 0
	s, dir := newSup(t, "exit", func(c *Config) {
		c.Ports, c.Dashboard = &Ports{Dashboard: 8265}, "127.0.0.1:8265"
		c.Relaunch = func() (Launch, error) {
			relaunched++
			return Launch{Command: []string{os.Args[0]}, Env: append(os.Environ(), "RAYHEAD_CHILD=block"),
				Ports: &Ports{Dashboard: 8266}, Dashboard: "127.0.0.1:8266"}, nil
		}
	})
	stop := supervise(t, s)
	rvtest.Until(5*time.Second, func() bool { return s.Status().State == Running })
	stop()
	st, _, err := ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if relaunched != 1 || st.Restarts != 1 || st.Ports == nil || st.Ports.Dashboard != 8266 || st.Dashboard != "127.0.0.1:8266" {
		t.Errorf("relaunched %d times; status %+v (ports %+v): want 1 relaunch, 1 restart, its ports and dashboard", relaunched, st, st.Ports)
	}
}

// supervise starts s and runs its Wait until stop, which ends it and
// returns once Wait has.
func supervise(t *testing.T, s *Supervisor) (stop func()) {
	t.Helper()
	r, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Wait(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// TestNamedKeepsStoreID: with a store (Config.ID) every run has the
// store's ID and Named names it while a run starts and restarts too (the
// nodes keep their Ray); without one each start has a new ID and Named
// names none until the run is up.
func TestNamedKeepsStoreID(t *testing.T) {
	slow := func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Hour, time.Hour }
	s, _ := newSup(t, "up-exit", slow, func(c *Config) { c.ID = "store-1" })
	stop := supervise(t, s)
	named := map[string]bool{}
	unnamed := 0
	if !rvtest.Until(20*time.Second, func() bool {
		id, ok := s.Named()
		if !ok {
			unnamed++
		}
		named[id] = true
		if st := s.Status(); st.ID != "" && st.ID != "store-1" {
			t.Errorf("a run's ID %q, want store-1", st.ID)
		}
		return s.Status().Restarts >= 3
	}) {
		t.Errorf("restarts = %d after 20 s, want 3", s.Status().Restarts)
	}
	stop()
	if len(named) != 1 || !named["store-1"] || unnamed > 0 {
		t.Errorf("Named gave %v (not ok %d times), want store-1 always", named, unnamed)
	}

	s2, _ := newSup(t, "silent")
	stop2 := supervise(t, s2)
	defer stop2()
	time.Sleep(200 * time.Millisecond)
	if id, ok := s2.Named(); ok {
		t.Errorf("without a store Named = %q while starting, want none", id)
	}
}
