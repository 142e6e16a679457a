package main

// TestVastLoad is the measurement of issue 10: `head serve --provider
// vast` with min_workers N (FAKEVAST_LOAD=N, e.g. 20) against fakevast
// enforcing vast's real per-endpoint limits (create 4.5 s + 12 s penalty,
// show 2 s, destroy 3 s, list 1 s, search 10/min), Docker-backed (one
// container per rental running the real agent). It prints the time to N
// enrolled nodes and the requests per minute per endpoint, fails on any
// 429 the head did not absorb, and checks that `head down` leaves nothing
// billing when vast refuses a destroy once. Opt-in: it takes minutes.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

func TestVastLoad(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FAKEVAST_LOAD"))
	if n <= 0 {
		t.Skip("set FAKEVAST_LOAD=20 to measure (minutes, N containers)")
	}
	if os.Geteuid() != 0 {
		e2eSkip(t, "not root: the flow runs Docker containers and nftables")
	}
	eng := dockerengine.New("")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, err := eng.Version(ctx); err != nil {
		e2eSkip(t, "no Docker Engine: "+err.Error())
	}
	repo, _ := filepath.Abs("../..")
	f := &flow{t: t, repo: repo, bin: t.TempDir(), eng: eng, name: fmt.Sprintf("load%d", os.Getpid()), logs: &syncBuf{}, min: n, max: n}
	f.build(ctx)
	img, err := docker.BuildImage(ctx, docker.ImageConfig{Engine: eng, FakerayDir: filepath.Join(repo, "test", "fakeray")})
	if err != nil {
		t.Fatal(err)
	}
	_ = fakevast.Cleanup(ctx, eng, f.name)
	be, err := fakevast.OpenDocker(ctx, fakevast.DockerConfig{Engine: eng, Name: f.name, Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := fakevast.Cleanup(c, eng, f.name); err != nil {
			t.Logf("cleanup: %v", err)
		}
		be.Close()
	})
	// vast's real limits (the default), one destroy refused.
	f.fake = fakevast.New(fakevast.Config{Key: e2eKey, Offers: fakevast.DefaultOffers(n + 10), StartDelay: 2 * time.Second,
		RefuseDestroys: 1, Backend: be, Log: slog.New(slog.NewTextHandler(f.logs, nil)).With("who", "fakevast")})
	api := httptest.NewServer(f.fake.Handler())
	defer api.Close()
	f.gw = be.Gateway().String()
	f.setup(ctx, api.URL, img)

	start := time.Now()
	f.start()
	f.waitFor(fmt.Sprintf("%d enrolled nodes", n), 25*time.Minute, func(cs []wire.Candidate) bool { return count(cs, wire.StateEnrolled) >= n })
	took := time.Since(start)
	calls, limited := f.fake.Stats()
	// The floor: n creates at vast's 4.5 s create interval, nothing else.
	floor := time.Duration(n-1) * fakevast.VastLimits()["create"].Interval
	t.Logf("LOAD: %d enrolled in %s (%.2f× the %s floor of %d creates 4.5 s apart); vast 429s %d; requests per endpoint %s",
		n, took.Round(time.Second), took.Seconds()/floor.Seconds(), floor, n, limited, perMinute(calls, took))
	if strings.Contains(f.logs.String(), "HTTP 429") {
		t.Errorf("a 429 reached the head as an error:\n%s", grepLines(f.logs.String(), "HTTP 429"))
	}
	cs := f.candidates()
	spend := 0.0
	for _, c := range cs {
		if c.State == wire.StateEnrolled && c.DPHTotal == 0 {
			t.Errorf("enrolled %s has no dph_total", c.CandidateID)
		}
		spend += c.DPHTotal
	}
	t.Logf("LOAD: cluster $%.3f/h over %d candidates", spend, len(cs))

	downStart := time.Now()
	before, _ := f.fake.Stats()
	out, err := f.run(ctx, "down", "--state", f.state, "--config", f.cfg, "--provider", "vast")
	if err != nil {
		t.Fatalf("head down: %v\n%s", err, out)
	}
	if live := f.fake.Live(); len(live) != 0 {
		t.Errorf("after head down (one destroy refused): %d instances still billing", len(live))
	}
	after, limitedAll := f.fake.Stats()
	t.Logf("LOAD: head down destroyed %d in %s (one destroy refused and retried; %d DELETEs, %d 429s in all)", n,
		time.Since(downStart).Round(time.Second), after["DELETE /api/v0/instances/{id}/"]-before["DELETE /api/v0/instances/{id}/"], limitedAll)
	f.stop()
	if p := os.Getenv("FAKEVAST_E2E_LOGS"); p != "" {
		_ = os.WriteFile(p, []byte(f.logs.String()), 0o600)
	}
}

// perMinute formats each endpoint's count and rate.
func perMinute(calls map[string]int, d time.Duration) string {
	keys := make([]string, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "[%s: %d, %.1f/min] ", k, calls[k], float64(calls[k])/d.Minutes())
	}
	return b.String()
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && len(out) < 10 {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
