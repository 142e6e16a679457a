package backoff

import (
	"context"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	mid := func() float64 { return 0.5 } // no jitter at the middle of the range
	p := Policy{Base: time.Second, Max: 30 * time.Second, Jitter: 0.2, Rand: mid}
	for attempt, want := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		if got := p.Delay(attempt); got != want*time.Second {
			t.Errorf("Delay(%d) = %v, want %v", attempt, got, want*time.Second)
		}
	}
	if got := p.Delay(1000); got != 30*time.Second {
		t.Errorf("Delay(1000) = %v, want the cap", got)
	}
}

func TestJitterBounds(t *testing.T) {
	for _, c := range []struct {
		r    float64
		want time.Duration
	}{{0, 90 * time.Second}, {0.5, 100 * time.Second}, {0.999999, 110 * time.Second}} {
		got := Jitter(100*time.Second, 0.1, func() float64 { return c.r })
		if d := got - c.want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("Jitter(100s, 10%%, r=%v) = %v, want ≈%v", c.r, got, c.want)
		}
	}
}

func TestSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err == nil {
		t.Error("Sleep on a cancelled context returned nil")
	}
}
