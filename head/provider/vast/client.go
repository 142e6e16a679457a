// Package vast is the built-in provider that rents GPU containers on vast.ai
// through its REST API (standard library only). SOURCES.md names the vast.ai
// document each behaviour comes from.
package vast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/ctxsleep"
	"github.com/rayvast/rayvast/internal/secret"
)

// DefaultBaseURL is vast's API root (SOURCES.md: API introduction).
const DefaultBaseURL = "https://console.vast.ai"

// ErrNotFound means vast answered 404 (or an empty show) for an instance.
var ErrNotFound = errors.New("vast: not found")

// APIError is a non-2xx answer that was not retried away. Msg is vast's own
// text (its "msg"/"error"/"message" field or the plain body), cut short.
type APIError struct {
	Op     string
	Status int
	Msg    string
	Code   string // vast's "error" field ("not_found", "invalid_args", …)
}

func (e *APIError) Error() string {
	return fmt.Sprintf("vast %s: HTTP %d: %s", e.Op, e.Status, e.Msg)
}

// Unwrap makes a 404 match ErrNotFound when its body says the thing is not
// found: vast also answers 404 to a bad key or path (SOURCES.md), and such
// an answer must not read as "the instance is gone".
func (e *APIError) Unwrap() error {
	if e.Status == http.StatusNotFound && notFoundBody(e.Code, e.Msg) {
		return ErrNotFound
	}
	return nil
}

func notFoundBody(code, msg string) bool {
	switch code {
	case "not_found", "no_such_instance":
		return true
	}
	m := strings.ToLower(msg)
	return code == "" && strings.Contains(m, "instance") && (strings.Contains(m, "not found") || strings.Contains(m, "no longer exists"))
}

// errorCode is the "error" field of a JSON error body.
func errorCode(b []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	return cut(e.Error, 64)
}

// ClientConfig builds a Client.
type ClientConfig struct {
	BaseURL string        // default DefaultBaseURL
	Key     secret.String // the API key: sent as a Bearer token, never logged
	HTTP    *http.Client  // default: no client timeout (each call has its own)
	Log     *slog.Logger
	// Limits are vast's per-endpoint intervals (default DefaultLimits);
	// every call waits for its endpoint's slot in the account's Pacer.
	Limits *Limits
	Now    func() time.Time
	// Sleep waits for a slot or between attempts; tests replace it.
	// Default: a timer that honours ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Retries bounds the attempts after the first (default 8). A 429 waits
	// for the pacer's backoff (vast sends no Retry-After); a 5xx waits
	// MinBackoff (default 1 s).
	Retries    int
	MinBackoff time.Duration
	// CreateTimeout bounds one create (default 120 s, the CLI's); other
	// calls get CallTimeout (default 30 s).
	CreateTimeout, CallTimeout time.Duration
}

// Client talks to vast's REST API.
type Client struct {
	cfg   ClientConfig
	base  *url.URL
	pacer *Pacer
}

// NewClient checks the config and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil {
		return nil, errors.New("vast client: base URL does not parse: want https://host[:port]")
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("vast client: base URL %q: want http(s)://host[:port]", u.Redacted())
	}
	if u.User != nil {
		return nil, fmt.Errorf("vast client: base URL %q: no credentials in the URL (the key goes in %s or a key file)", u.Redacted(), EnvAPIKey)
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		// The key travels in a header: over plain HTTP anyone on the path reads it.
		return nil, fmt.Errorf("vast client: base URL %q: http:// only to a loopback address (a local fake); use https://", cfg.BaseURL)
	}
	if cfg.Key.IsZero() {
		return nil, errors.New("vast client: no API key")
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Sleep == nil {
		cfg.Sleep = ctxsleep.Sleep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 8
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.CreateTimeout <= 0 {
		cfg.CreateTimeout = 120 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	lim := DefaultLimits()
	if cfg.Limits != nil {
		lim = *cfg.Limits
	}
	return &Client{cfg: cfg, base: u, pacer: NewPacer(lim, cfg.Now, cfg.Sleep)}, nil
}

// Pacer is the client's request scheduler (its counts are the measured
// request rates).
func (c *Client) Pacer() *Pacer { return c.pacer }

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// retryPolicy says which failures a call may repeat. Reads and destroys are
// idempotent; a create is repeated only when vast surely did not act on it
// (429, 503), never after a 500, 502, 504 or a broken connection, which
// might have rented an instance (List finds it by label).
type retryPolicy int

const (
	idempotent retryPolicy = iota
	notIdempotent
)

func (p retryPolicy) retry(status int, transportErr bool) bool {
	switch {
	case status == http.StatusTooManyRequests:
		return true
	case status == http.StatusServiceUnavailable:
		return true // refused in front of the API: nothing acted on it
	case p == notIdempotent:
		// 502 and 504 may come after the API rented (the gateway lost or
		// timed out waiting for the answer): a repeat could rent twice.
		return false
	case status == http.StatusBadGateway, status == http.StatusGatewayTimeout:
		return true
	case transportErr, status >= 500:
		return true
	}
	return false
}

// call is one API request.
type call struct {
	op, ep       string // log name and pacer endpoint
	method, path string
	query        string // raw, already encoded
	body, out    any
	pol          retryPolicy
}

// do sends one API call through the pacer, with retries, and decodes a 2xx
// JSON answer into out.
func (c *Client) do(ctx context.Context, k call) error {
	var payload []byte
	if k.body != nil {
		var err error
		if payload, err = json.Marshal(k.body); err != nil {
			return fmt.Errorf("vast %s: encode: %w", k.op, err)
		}
	}
	u := *c.base
	u.Path = c.base.Path + k.path
	u.RawQuery = k.query
	timeout := c.cfg.CallTimeout
	if k.ep == EpCreate {
		timeout = c.cfg.CreateTimeout
	}
	for attempt := 0; ; attempt++ {
		done, err := c.pacer.Wait(ctx, k.ep)
		if err != nil {
			return fmt.Errorf("vast %s: %w", k.op, err)
		}
		status, data, err := c.once(ctx, timeout, k.method, u.String(), payload)
		if status == http.StatusTooManyRequests {
			wait := c.pacer.Limited(k.ep)
			c.cfg.Log.Info("vast rate limit, backing off", "op", k.op, "attempt", attempt+1, "wait", wait.String())
		} else {
			c.pacer.OK(k.ep)
		}
		if err == nil && status/100 >= 5 && k.pol.retry(status, false) {
			c.pacer.Delay(k.ep, c.cfg.MinBackoff) // 5xx: retry soon, a few times
		}
		done()
		if err == nil && status/100 == 2 {
			if k.out == nil {
				return nil
			}
			if err := json.Unmarshal(data, k.out); err != nil {
				return fmt.Errorf("vast %s: decode answer: %w", k.op, err)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("vast %s: %w", k.op, ctx.Err())
		}
		var final error
		if err != nil {
			final = fmt.Errorf("vast %s: %w", k.op, err)
		} else {
			// vast's text could quote the key it refused: never pass it on.
			// (scrubbed before cutting, so no prefix of it survives either).
			data = bytes.ReplaceAll(data, []byte(c.cfg.Key.Reveal()), []byte("[api key]"))
			final = &APIError{Op: k.op, Status: status, Msg: errorText(data), Code: errorCode(data)}
		}
		if attempt >= c.cfg.Retries || !k.pol.retry(status, err != nil) {
			return final
		}
		// The wait is the pacer's next slot for this endpoint.
		if status != http.StatusTooManyRequests {
			c.cfg.Log.Warn("vast call failed, retrying", "op", k.op, "status", status, "attempt", attempt+1, "err", final)
		}
	}
}

// maxAnswer bounds an answer body (an instance list of a large account is
// well under this).
const maxAnswer = 16 << 20

func (c *Client) once(ctx context.Context, timeout time.Duration, method, u string, payload []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Key.Reveal())
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return 0, nil, scrubURLError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, data, nil
}

// scrubURLError keeps the cause of a transport error; the URL carries no
// secret (the key travels in a header), but drop it anyway to keep logs short.
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// errorText pulls vast's message out of an error body: JSON with msg, error
// or message, else the plain text (SOURCES.md: rate limits and errors).
func errorText(b []byte) string {
	var e struct {
		Msg     string `json:"msg"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		var parts []string
		for _, s := range []string{e.Error, e.Msg, e.Message} {
			if s != "" {
				parts = append(parts, s)
			}
		}
		if len(parts) > 0 {
			return cut(strings.Join(parts, ": "), 300)
		}
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty answer)"
	}
	return cut(s, 300)
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
