// Package ctxsleep is a sleep that a context can cut short: every retry loop
// in rayvast waits with it (or with a fake of the same shape in tests), and
// every periodic loop runs with Every.
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

// Every calls f once every d until ctx ends; the first call is after d
// (a loop that also works at once calls f itself first). A call that runs
// long delays the next: ticks are dropped, never queued.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if ctx.Err() != nil { // both were ready: the end wins
				return
			}
			f()
		}
	}
}
