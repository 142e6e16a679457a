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
