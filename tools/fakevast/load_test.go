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
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

func TestVastLoad(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FAKEVAST_LOAD"))
	if n <= 0 {
		t.Skip("set FAKEVAST_LOAD=20 to measure (minutes, N containers)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	f := openFlow(ctx, t, "load", 2*time.Minute)
	f.min, f.max = n, n
	// vast's real limits (the default), one destroy refused.
	f.setup(ctx, f.serveFake(fakevast.Config{Key: e2eKey, Offers: fakevast.DefaultOffers(n + 10), StartDelay: 2 * time.Second, RefuseDestroys: 1}), f.img)

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
