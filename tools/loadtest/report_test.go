package main

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestComparisonString(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    comparison
		want string
	}{
		{"met", comparison{what: "enrollment CPU", head: 7.2, bare: 6, unit: "ms", target: 1.25},
			"enrollment CPU: head 7.20 ms, bare 6.00 ms: ×1.20 (target ≤ ×1.25: met)"},
		{"at the target is met", comparison{what: "x", head: 125, bare: 100, unit: "µs", target: 1.25},
			"x: head 125 µs, bare 100 µs: ×1.25 (target ≤ ×1.25: met)"},
		{"missed", comparison{what: "p99", head: 31, bare: 15.5, unit: "ms", target: 1.5},
			"p99: head 31.0 ms, bare 15.5 ms: ×2.00 (target ≤ ×1.50: MISSED)"},
		{"no target", comparison{what: "wall", head: 3.36, bare: 2.34, unit: "s"},
			"wall: head 3.36 s, bare 2.34 s: ×1.44"},
		{"no bare figure", comparison{what: "y", head: 1, unit: "ms", target: 1.25},
			"y: head 1.00 ms, bare 0.00 ms: ×0.00 (target ≤ ×1.25: no bare figure)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestReportListsEveryComparison(t *testing.T) {
	var rep report
	rep.add(comparison{what: "a", head: 2, bare: 1, unit: "ms", target: 1.25})
	rep.add(comparison{what: "b", head: 1, bare: 1, unit: "µs", target: 1.25})
	var buf bytes.Buffer
	rep.write(&buf)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "a: ") || !strings.Contains(lines[1], "MISSED") || !strings.Contains(lines[2], "b: ") {
		t.Errorf("got %q, want a heading and one line per comparison in order", lines)
	}
}

func TestPerEach(t *testing.T) {
	if got := perEach(10, 4); got != 2.5 {
		t.Errorf("perEach(10, 4) = %v, want 2.5", got)
	}
	if got := perEach(10, 0); got != 0 {
		t.Errorf("perEach(10, 0) = %v, want 0", got)
	}
}

func TestResultRecord(t *testing.T) {
	var r result
	r.record(2500*time.Millisecond, 150*time.Millisecond, nil)
	r.record(0, time.Millisecond, nil)
	r.record(0, 0, errors.New("reset"))
	r.record(0, 0, errors.New("later"))
	if len(r.Latencies) != 2 || r.Failures != 2 || r.FirstErr != "reset" {
		t.Errorf("got %d latencies, %d failures, first %q; want 2, 2, reset", len(r.Latencies), r.Failures, r.FirstErr)
	}
	if got := slowBySecond([]result{r, r}); !slices.Equal(got, []int{0, 0, 2}) {
		t.Errorf("slow by second %v, want [0 0 2]", got)
	}
}
