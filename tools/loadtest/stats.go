package main

import (
	"slices"
	"time"
)

func merge(rs []result) (lat []int64, fails int) {
	for _, r := range rs {
		lat = append(lat, r.Latencies...)
		fails += r.Failures
	}
	slices.Sort(lat)
	return lat, fails
}

// pct is the p-th percentile of sorted microseconds.
func pct(sorted []int64, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return (time.Duration(sorted[i]) * time.Microsecond).Round(10 * time.Microsecond)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func firstErr(rs []result) string {
	for _, r := range rs {
		if r.Err != "" {
			return "(" + r.Err + ")"
		}
		if r.FirstErr != "" {
			return "(first: " + r.FirstErr + ")"
		}
	}
	return ""
}

func retries(rs []result) (n int) {
	for _, r := range rs {
		n += r.Retries
	}
	return n
}

// slowBySecond adds up the workers' counts of slow heartbeats per second.
func slowBySecond(rs []result) []int {
	var out []int
	for _, r := range rs {
		for sec, n := range r.Slow {
			for len(out) <= sec {
				out = append(out, 0)
			}
			out[sec] += n
		}
	}
	return out
}
