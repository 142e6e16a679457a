package backoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// TransientError marks a failure worth retrying: a network error, a 5xx, a 429.
type TransientError struct {
	Op  string
	Err error
}

func (e *TransientError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// Transient wraps err as a *TransientError.
func Transient(op string, err error) error { return &TransientError{Op: op, Err: err} }

// RetryConfig is how Retry behaves. Zero values are the defaults.
type RetryConfig struct {
	Log        *slog.Logger
	Now        func() time.Time
	Sleep      SleepFunc
	Policy     Policy        // default 1s…60s, ±20%
	MaxElapsed time.Duration // give up after this long (default 15 min)
}

func (c *RetryConfig) defaults() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = Sleep
	}
	if c.Policy.Base == 0 {
		c.Policy = Policy{Base: time.Second, Max: time.Minute, Jitter: 0.2, Rand: c.Policy.Rand}
	}
	if c.MaxElapsed == 0 {
		c.MaxElapsed = 15 * time.Minute
	}
}

// Retry runs op until it succeeds, fails with an error that is not a
// *TransientError, ctx ends, or MaxElapsed would pass before the next try.
func Retry[T any](ctx context.Context, cfg RetryConfig, what string, op func(context.Context) (T, error)) (T, error) {
	cfg.defaults()
	start := cfg.Now()
	for attempt := 0; ; attempt++ {
		v, err := op(ctx)
		var te *TransientError
		if err == nil || !errors.As(err, &te) {
			return v, err
		}
		d := cfg.Policy.Delay(attempt)
		if cfg.Now().Add(d).Sub(start) > cfg.MaxElapsed {
			return v, fmt.Errorf("%s: giving up after %d tries: %w", what, attempt+1, err)
		}
		cfg.Log.Warn("retrying", "op", what, "attempt", attempt+1, "in", d.Round(time.Millisecond), "err", err)
		if serr := cfg.Sleep(ctx, d); serr != nil {
			return v, fmt.Errorf("%s: %w (last error: %v)", what, serr, err)
		}
	}
}
