package checkgate

import (
	"runtime/metrics"
	"sync"
	"time"
)

// schedMetric is the Go runtime's histogram of how long goroutines were
// runnable before they ran: the head's own queue for its CPUs.
const schedMetric = "/sched/latencies:seconds"

// SchedLatency returns a Pressure that reports the p99 of the scheduling
// latencies recorded since its previous call.
func SchedLatency() func() (time.Duration, bool) {
	var mu sync.Mutex
	var prev, delta []uint64 // kept across calls: it runs every 50 ms for the head's life
	s := []metrics.Sample{{Name: schedMetric}}
	return func() (time.Duration, bool) {
		mu.Lock()
		defer mu.Unlock()
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindFloat64Histogram {
			return 0, false // not this runtime: the gate then only grows
		}
		h := s[0].Value.Float64Histogram()
		delta = append(delta[:0], h.Counts...)
		for i := range min(len(prev), len(delta)) {
			delta[i] -= prev[i]
		}
		prev = append(prev[:0], h.Counts...)
		return quantile(delta, h.Buckets, 0.99)
	}
}

// quantile is the upper bound of the bucket holding the q-th of the counts
// (buckets has one more edge than counts). false when counts are all zero.
func quantile(counts []uint64, buckets []float64, q float64) (time.Duration, bool) {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0, false
	}
	rank := uint64(float64(total) * q)
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen > rank {
			edge := buckets[i+1]
			if edge > 3600 { // the last bucket is open (+Inf)
				edge = buckets[i]
			}
			return time.Duration(edge * float64(time.Second)), true
		}
	}
	return time.Duration(buckets[len(buckets)-1] * float64(time.Second)), true
}
