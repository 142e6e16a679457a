package enroll

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/internal/wire"
)

// maxBundle bounds the enroll answer: certificates, keys and a shim file.
const maxBundle = 4 << 20

// Refusal is a final "no" from the head (403, or any 4xx but 429): the
// agent must not retry it.
type Refusal struct {
	Status int
	Body   wire.ErrorBody // {"error":"refused"} or {"error":"rejected","reason":…}
}

func (r *Refusal) Error() string {
	if r.Body.Reason != "" {
		return fmt.Sprintf("enroll: %d %s (%s)", r.Status, r.Body.Error, r.Body.Reason)
	}
	if r.Body.Error != "" {
		return fmt.Sprintf("enroll: %d %s", r.Status, r.Body.Error)
	}
	return fmt.Sprintf("enroll: status %d", r.Status)
}

// TransientError is a failure worth retrying: network errors, 5xx, 429.
type TransientError struct {
	Op  string
	Err error
}

func (e *TransientError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// Config is how Enroll and Retry behave. Zero values are the defaults.
type Config struct {
	Log        *slog.Logger
	Now        func() time.Time
	Sleep      backoff.SleepFunc
	Backoff    backoff.Policy // default 1s…60s, ±20%
	MaxElapsed time.Duration  // give up after this long (default 15 min)
}

func (c *Config) defaults() {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = backoff.Sleep
	}
	if c.Backoff.Base == 0 {
		c.Backoff = backoff.Policy{Base: time.Second, Max: time.Minute, Jitter: 0.2, Rand: c.Backoff.Rand}
	}
	if c.MaxElapsed == 0 {
		c.MaxElapsed = 15 * time.Minute
	}
}

// Retry runs op until it succeeds, fails with an error that is not a
// *TransientError, ctx ends, or MaxElapsed has passed since the first try.
func Retry[T any](ctx context.Context, cfg Config, what string, op func(context.Context) (T, error)) (T, error) {
	cfg.defaults()
	start := cfg.Now()
	for attempt := 0; ; attempt++ {
		v, err := op(ctx)
		var te *TransientError
		if err == nil || !errors.As(err, &te) {
			return v, err
		}
		d := cfg.Backoff.Delay(attempt)
		if cfg.Now().Add(d).Sub(start) > cfg.MaxElapsed {
			return v, fmt.Errorf("%s: giving up after %d tries: %w", what, attempt+1, err)
		}
		cfg.Log.Warn("retrying", "op", what, "attempt", attempt+1, "in", d.Round(time.Millisecond), "err", err)
		if serr := cfg.Sleep(ctx, d); serr != nil {
			return v, fmt.Errorf("%s: %w (last error: %v)", what, serr, err)
		}
	}
}

// Enroll POSTs req to url once. A 200 is decoded strictly into the bundle;
// 5xx/429 and network errors are *TransientError; other statuses *Refusal.
func Enroll(ctx context.Context, hc *http.Client, url string, req wire.EnrollRequest) (wire.EnrollResponse, error) {
	var out wire.EnrollResponse
	body, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("enroll: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return out, fmt.Errorf("enroll: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hr)
	if err != nil {
		return out, &TransientError{Op: "enroll", Err: err}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := wire.Decode(resp.Body, maxBundle, &out); err != nil {
			return out, fmt.Errorf("enroll: decode bundle: %w", err)
		}
		if out.Version != wire.Version {
			return out, fmt.Errorf("enroll: bundle version %d not supported", out.Version)
		}
		return out, nil
	case retryable(resp.StatusCode):
		io.Copy(io.Discard, io.LimitReader(resp.Body, wire.MaxBody))
		return out, &TransientError{Op: "enroll", Err: fmt.Errorf("status %d", resp.StatusCode)}
	default:
		r := &Refusal{Status: resp.StatusCode}
		_ = wire.Decode(resp.Body, wire.MaxBody, &r.Body) // best effort: a proxy's HTML is still a refusal
		return out, r
	}
}
