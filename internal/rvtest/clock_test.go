package rvtest

import (
	"sync"
	"testing"
	"time"
)

// TestClockMovesOnlyWhenTold proves the clock stands still until Add, moves by
// exactly d either way, and is safe under concurrent Add and Now.
func TestClockMovesOnlyWhenTold(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := NewClock(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	c.Add(-time.Hour)
	c.Add(90 * time.Minute)
	if got, want := c.Now(), t0.Add(30*time.Minute); !got.Equal(want) {
		t.Errorf("after -1h +90m: Now = %v, want %v", got, want)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); c.Add(time.Second); _ = c.Now() }()
	}
	wg.Wait()
	if got, want := c.Now(), t0.Add(30*time.Minute+8*time.Second); !got.Equal(want) {
		t.Errorf("after 8 concurrent adds: Now = %v, want %v", got, want)
	}
}
