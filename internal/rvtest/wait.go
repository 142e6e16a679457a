package rvtest

import (
	"testing"
	"time"
)

// Until polls cond, more slowly as time goes on (1ms up to 100ms apart),
// until it holds or limit has passed, and says whether it held. It needs
// no testing.T, so helper processes (re-run test binaries) use it too.
func Until(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pause)
	}
}

// WaitFor fails t unless cond returns nil within limit; the failure says
// cond's last error, which should name what was awaited and what was seen.
func WaitFor(t testing.TB, limit time.Duration, cond func() error) {
	t.Helper()
	var last error
	if !Until(limit, func() bool { last = cond(); return last == nil }) {
		t.Fatalf("not within %v: %v", limit, last)
	}
}
