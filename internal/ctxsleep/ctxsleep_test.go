package ctxsleep

import (
	"context"
	"testing"
	"time"
)

// TestCancelCutsShort proves a cancelled context ends an hour-long sleep at
// once with the context's error, and a short sleep ends with nil.
func TestCancelCutsShort(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Errorf("cancelled: err = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("short sleep: err = %v", err)
	}
}

// TestEveryTicksUntilCancelled proves Every calls f on its ticks, not at
// once, and returns when ctx ends (here from inside f, on the third call).
func TestEveryTicksUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		Every(ctx, 2*time.Millisecond, func() {
			calls++
			if calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if calls != 3 {
		t.Fatalf("f called %d times, want 3 (none after the cancel)", calls)
	}
	if time.Since(start) < 6*time.Millisecond {
		t.Fatal("Every called f before its first tick")
	}
}
