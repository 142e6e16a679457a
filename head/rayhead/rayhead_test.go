package rayhead

import (
	"context"
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
// RAYHEAD_CHILD=exit exits 3 at once, =block blocks until signalled.
func TestMain(m *testing.M) {
	switch os.Getenv("RAYHEAD_CHILD") {
	case "exit":
		os.Stdout.WriteString("child ran\n")
		os.Exit(3)
	case "block":
		os.Stdout.WriteString("child blocking\n")
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func newSup(t *testing.T, mode string) (*Supervisor, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := New(Config{Command: []string{os.Args[0]}, Env: append(os.Environ(), "RAYHEAD_CHILD="+mode),
		Address: "127.0.0.1:6379", LogPath: filepath.Join(dir, "ray-head.log"), StatePath: filepath.Join(dir, StateFile),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, StopGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestRestartsWithBackoffAndKeepsLog(t *testing.T) {
	s, dir := newSup(t, "exit")
	r, err := s.Start()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Wait(ctx); close(done) }()
	if !rvtest.Until(20*time.Second, func() bool { return s.Status().Restarts >= 3 }) {
		t.Fatalf("restarts = %d after 20 s, want 3", s.Status().Restarts)
	}
	cancel()
	<-done
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
	got := strings.Join(Command("python3", "10.0.0.1:6379"), " ")
	want := "python3 -m ray.scripts.scripts start --head --block --node-ip-address=10.0.0.1 --port=6379 --disable-usage-stats"
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
	argv := WithAutoscaler(Command("py", "10.0.0.1:6379"), "/s/autoscaler.yaml")
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
