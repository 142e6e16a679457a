// Package ctxsleep is a sleep that a context can cut short: every retry loop
// in rayvast waits with it (or with a fake of the same shape in tests).
package ctxsleep

import (
	"context"
	"time"
)

// Func is the shape tests replace: wait d or until ctx ends.
type Func func(ctx context.Context, d time.Duration) error

// Sleep waits d, or until ctx ends and then returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
