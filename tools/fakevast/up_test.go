package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// TestUpVast: `head up --config` with a vast provider block (no
// RAYVAST_VAST_CONFIG, no head init, no ray-head-cert by hand) against the
// fake vast API: the stand-in Ray head starts, min_workers 2 are rented and
// enroll; Ctrl-C stops the head and the Ray head and leaves the rentals;
// `head down --config` ends them.
func TestUpVast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	f := openFlow(ctx, t, "up", time.Minute)
	repo, img := f.repo, f.img
	apiURL := f.serveFake(fakevast.Config{Key: e2eKey, Offers: fakevast.DefaultOffers(4), StartDelay: time.Second, MinInterval: 50 * time.Millisecond})

	dir := t.TempDir()
	f.cfg, f.state = filepath.Join(dir, "cluster.json"), filepath.Join(dir, "cluster.state")
	cfg := fmt.Sprintf(`{"cluster":%q,"ray":{"head_address":"%s:6379"},"heartbeat_interval_s":2,
		"node_types":{"cpu":{"gpus":0,"min_workers":2,"max_workers":2,"resources":{},"labels":{}}},
		"guest_api":{},
		"provider":{"kind":"vast","base_url":%q,"image":%q,"node_types":{"cpu":{"gpu_name":"fake-cpu","max_dph":1}}},
		"max_dph_total":5}`, f.name, f.gw, apiURL, img)
	if err := os.WriteFile(f.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	f.env = append(os.Environ(), "VAST_API_KEY="+e2eKey, "PYTHONPATH="+filepath.Join(repo, "test", "fakeray"),
		"FAKERAY_RECORD="+filepath.Join(dir, "ray-head-record.json"))
	cmd := exec.Command(f.head, "up", "--config", f.cfg, "--agent", f.agent,
		"--listen-a", fmt.Sprintf("%s:%d", f.gw, freePort(t, f.gw)), "--listen-b", fmt.Sprintf("%s:%d", f.gw, freePort(t, f.gw)))
	cmd.Env = f.env
	out := &rvtest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = firewall.Remove(context.Background(), tableOf(f.state), nil)
		t.Logf("head up output:\n%s", out.String())
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(f.state, "head.log"))
			t.Logf("head.log:\n%s\nother logs:\n%s", tail(string(b), 8000), tail(f.logs.String(), 4000))
		}
	})
	for !strings.Contains(out.String(), "listening: port A") {
		select {
		case err := <-done:
			t.Fatalf("head up exited: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	f.waitFor("2 enrolled nodes", 4*time.Minute, func(cs []wire.Candidate) bool { return count(cs, wire.StateEnrolled) == 2 })
	for _, want := range []string{"state: made " + f.state, "provider vast: ready", "Ray head: running at " + f.gw + ":6379", "Ray head: running · $0."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("progress lacks %q", want)
		}
	}
	priced := false // a rental's line shows its price (whichever state the poll saw)
	for _, l := range strings.Split(out.String(), "\n") {
		priced = priced || (strings.HasPrefix(l, "· rental ") && strings.Contains(l, "/h"))
	}
	if !priced {
		t.Error("no rental line shows its $/h")
	}
	if strings.Contains(out.String(), e2eKey) {
		t.Error("head up printed the API key")
	}

	// Ctrl-C: the rentals stay for head down.
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("head up after Ctrl-C: %v, want exit 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("head up did not stop within a minute of Ctrl-C")
	}
	if live := f.fake.Live(); len(live) != 2 {
		t.Errorf("after Ctrl-C: %d instances, want the 2 rentals kept", len(live))
	}
	if b, err := f.run(ctx, "down", "--config", f.cfg); err != nil {
		t.Fatalf("head down --config: %v\n%s", err, b)
	}
	if live := f.fake.Live(); len(live) != 0 {
		t.Errorf("after head down: %d instances still rented", len(live))
	}
}
