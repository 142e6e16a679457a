package rvtest

import (
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrentWrites proves no write is lost or torn when many goroutines
// write at once (run with -race to prove the locking too).
func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("line\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 1600 {
		t.Errorf("got %d lines, want 1600", got)
	}
}
