package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestUpDockerExample is the README's quick start: `head up --config
// examples/docker.json` brings up the (stand-in) Ray head and two nodes in
// containers with one command; Ctrl-C stops the head and the Ray head and
// leaves the rentals; `head down --config` ends them. The example is used
// as shipped but for its cluster name and head IP (two runs at once must
// not share them).
func TestUpDockerExample(t *testing.T) {
	needSuite(t)
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(suite.repo, "examples", "docker.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cluster := fmt.Sprintf("%sup-%d", clusterPrefix, time.Now().UnixNano()%1e6)
	t.Cleanup(func() {
		_ = docker.Cleanup(context.Background(), suite.eng, func(c string) bool { return c == cluster })
	})
	headIP := fmt.Sprintf("10.%d.%d.1", 100+os.Getpid()%100, time.Now().UnixNano()%250)
	cfg["cluster"] = cluster
	cfg["ray"].(map[string]any)["head_address"] = headIP + ":6379"
	cfg["heartbeat_interval_s"] = heartbeatInterval
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "docker.json")
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "docker.state")
	record := filepath.Join(dir, "ray-head-record.json")

	out := &rvtest.Buffer{}
	cmd := exec.Command(suite.head, "up", "--config", cfgPath, "--agent", suite.agent,
		"--bootloader", filepath.Join(suite.repo, "bootloader.sh"))
	cmd.Env = append(os.Environ(), docker.EnvImage+"="+suite.image,
		"PYTHONPATH="+filepath.Join(suite.repo, "test", "fakeray"), "FAKERAY_RECORD="+record)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
		t.Logf("head up output:\n%s", out.String())
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(state, "head.log")); err == nil {
				t.Logf("head.log:\n%s", b)
			}
		}
	}()

	admin := adminclient.Unix(filepath.Join(state, "admin.sock"), 5*time.Second)
	waitFor(t, 3*time.Minute, "two nodes with Ray running", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("head up exited early: %v\n%s", err, out.String())
		default:
		}
		var nodes []wire.Node
		if err := admin.Do(context.Background(), http.MethodGet, "/v1/nodes", nil, &nodes, http.StatusOK); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, n := range nodes {
			if n.Ray.State == "running" {
				running++
			}
		}
		// and head up's live summary has caught up (it polls every 2 s)
		summary := strings.Contains(out.String(), "nodes: 2 (2 with Ray running) · Ray head: running")
		return running == 2 && summary, fmt.Sprintf("%d nodes, %d with Ray running, summary shown %v", len(nodes), running, summary)
	})
	text := out.String()
	for _, want := range []string{"state: made " + state, "Ray head: running at " + headIP + ":6379", "listening: port A " + headIP,
		"Ray autoscaler config: ", ": enrolled"} {
		if !strings.Contains(text, want) {
			t.Errorf("progress lacks %q", want)
		}
	}
	rec := readRecord(t, record)
	if !strings.Contains(strings.Join(rec.Argv, " "), "start --head --block --node-ip-address="+headIP+" --port=6379") {
		t.Errorf("Ray head argv = %v", rec.Argv)
	}
	for k, v := range map[string]string{"RAY_USE_TLS": "1", "RAY_AUTH_MODE": "token", "RAY_CLOUD_INSTANCE_ID": "head"} {
		if rec.Env[k] != v {
			t.Errorf("Ray head env %s = %q, want %q", k, rec.Env[k], v)
		}
	}
	st, err := exec.Command(suite.head, "status", "--state", state).CombinedOutput()
	if err != nil || !strings.Contains(string(st), "RAY HEAD  "+headIP+":6379  running") {
		t.Errorf("head status (%v) lacks the Ray head's line:\n%s", err, st)
	}

	// Ctrl-C: the head and the Ray head stop; the rentals stay.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("head up after Ctrl-C: %v, want exit 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("head up did not stop within a minute of Ctrl-C")
	}
	if rec := readRecord(t, record); rec.Signal == 0 {
		t.Errorf("the Ray head was not stopped by a signal: %+v", rec)
	}
	cs, err := suite.eng.ListContainers(context.Background(), docker.LabelCluster+"="+cluster)
	if err != nil || len(cs) != 2 {
		t.Errorf("after Ctrl-C: %d containers (%v), want the 2 rentals kept for head down", len(cs), err)
	}
	down, err := exec.Command(suite.head, "down", "--config", cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("head down: %v\n%s", err, down)
	}
	cs, err = suite.eng.ListContainers(context.Background(), docker.LabelCluster+"="+cluster)
	if err != nil || len(cs) != 0 {
		t.Errorf("after head down: %d containers (%v), want 0\n%s", len(cs), err, down)
	}
	if ns, err := suite.eng.ListNetworks(context.Background(), docker.LabelCluster+"="+cluster); err != nil || len(ns) != 0 {
		t.Errorf("after head down: %d networks (%v), want 0", len(ns), err)
	}
}

type rayRecord struct {
	Argv   []string          `json:"argv"`
	Env    map[string]string `json:"env"`
	Signal int               `json:"signal"`
}

func readRecord(t *testing.T, path string) rayRecord {
	t.Helper()
	var r rayRecord
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		t.Errorf("Ray head record %s: %v", path, err)
	}
	return r
}
