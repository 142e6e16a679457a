// Package backoff computes retry delays (exponential with jitter) and
// periodic delays (an interval with jitter), with randomness and sleeping
// injectable so tests neither guess nor wait.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/rayvast/rayvast/internal/ctxsleep"
)

// Policy is an exponential backoff: Base·2^attempt capped at Max, then
// spread by ±Jitter (a fraction, e.g. 0.2) so many agents don't retry in step.
type Policy struct {
	Base, Max time.Duration
	Jitter    float64
	Rand      func() float64 // [0,1); nil = math/rand/v2
}

// Delay is the wait before retry number attempt (0 = first retry).
func (p Policy) Delay(attempt int) time.Duration {
	d := p.Base
	for i := 0; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	if d > p.Max {
		d = p.Max
	}
	return Jitter(d, p.Jitter, p.Rand)
}

// Jitter spreads d uniformly over [d·(1-frac), d·(1+frac)).
func Jitter(d time.Duration, frac float64, rnd func() float64) time.Duration {
	if rnd == nil {
		rnd = rand.Float64
	}
	return time.Duration(float64(d) * (1 - frac + 2*frac*rnd()))
}

// SleepFunc waits d or until ctx ends (then it returns ctx.Err()).
type SleepFunc = ctxsleep.Func

// Sleep is the real SleepFunc.
func Sleep(ctx context.Context, d time.Duration) error { return ctxsleep.Sleep(ctx, d) }
