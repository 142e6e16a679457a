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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/ctxsleep"
	"github.com/rayvast/rayvast/internal/secret"
)

// DefaultBaseURL is vast's API root (SOURCES.md: API introduction).
const DefaultBaseURL = "https://console.vast.ai"

// ErrNotFound means vast answered 404 (or an empty show) for an instance.
var ErrNotFound = errors.New("vast: not found")

// Errors an APIError matches (errors.Is) by what vast's answer means for
// renting (SOURCES.md: vast's error answers).
var (
	// ErrAuth: vast refused the API key (an "auth_error" body, which vast
	// sends with 404 as well as 401/403): wrong or revoked. Stop renting.
	ErrAuth = errors.New("vast refused the API key (wrong or revoked)")
	// ErrDeprecated: vast retired the endpoint (410 deprecated_endpoint).
	ErrDeprecated = errors.New("vast retired this endpoint")
	// ErrQuota: the account's daily search quota is used up (429
	// search_quota_exceeded); no search until it resets.
	ErrQuota = errors.New("vast's daily search quota is used up")
	// ErrBilling: a create refused 400 invalid_args for the account's
	// billing (no credit, no card): no create can succeed. Stop renting.
	ErrBilling = errors.New("vast refused the create for the account's billing")
	// ErrOfferGone: the offer cannot be had (404/410 no_such_ask, "no
	// longer available", or 400 invalid_args for a host that blacklisted
	// the account): skip it, rent another.
	ErrOfferGone = errors.New("vast: offer not available")
)

// APIError is a non-2xx answer that was not retried away. Msg is vast's own
// text (its "msg"/"error"/"message" field or the plain body), cut short.
type APIError struct {
	Op     string
	Call   string // "POST /api/v0/bundles/": which request vast answered
	Status int
	Msg    string
	Code   string    // vast's "error" field ("not_found", "invalid_args", …)
	Until  time.Time // ErrQuota: when the quota resets
}

func (e *APIError) Error() string {
	switch {
	case e.is(ErrAuth):
		return fmt.Sprintf("vast %s: HTTP %d: %s: vast refused the API key (wrong or revoked); renting stops until the head restarts with a good key", e.Op, e.Status, e.Msg)
	case e.is(ErrDeprecated):
		return fmt.Sprintf("vast %s: HTTP %d: %s: vast retired %s (deprecated_endpoint); this rayvast speaks an API vast no longer serves", e.Op, e.Status, e.Msg, e.Call)
	case e.is(ErrQuota):
		return fmt.Sprintf("vast %s: HTTP %d: %s: the account's daily search quota is used up; no search until %s", e.Op, e.Status, e.Msg, e.Until.UTC().Format(time.RFC3339))
	case e.is(ErrBilling):
		return fmt.Sprintf("vast %s: HTTP %d: %s: vast refuses creates for the account's billing (credit or payment); renting stops for a while", e.Op, e.Status, e.Msg)
	}
	return fmt.Sprintf("vast %s: HTTP %d: %s", e.Op, e.Status, e.Msg)
}

// Unwrap makes a 404 match ErrNotFound when its body says the thing is not
// found: vast also answers 404 to a bad key or path (SOURCES.md), and such
// an answer must not read as "the instance is gone". The other sentinels
// above say what the rest mean.
func (e *APIError) Unwrap() error {
	for _, s := range []error{ErrAuth, ErrDeprecated, ErrQuota, ErrBilling, ErrOfferGone} {
		if e.is(s) {
			return s
		}
	}
	if e.Status == http.StatusNotFound && notFoundBody(e.Code, e.Msg) {
		return ErrNotFound
	}
	return nil
}

// is classes the answer (the table in SOURCES.md).
func (e *APIError) is(target error) bool {
	m := strings.ToLower(e.Msg)
	switch target {
	case ErrAuth:
		return e.Code == "auth_error" || e.Status == http.StatusUnauthorized
	case ErrDeprecated:
		return e.Status == http.StatusGone && e.Code == "deprecated_endpoint"
	case ErrQuota:
		return e.Status == http.StatusTooManyRequests && e.Code == "search_quota_exceeded"
	case ErrBilling:
		return e.Status == http.StatusBadRequest && e.Code == "invalid_args" && strings.HasPrefix(e.Op, "create") && billingText(m)
	case ErrOfferGone:
		if !strings.HasPrefix(e.Op, "create") || e.Code == "auth_error" {
			return false
		}
		return e.Code == "no_such_ask" || (e.Status == http.StatusGone && e.Code != "deprecated_endpoint") ||
			strings.Contains(m, "no longer available") ||
			(e.Status == http.StatusBadRequest && e.Code == "invalid_args" && strings.Contains(m, "blacklist"))
	}
	return false
}

// billingText: vast's reference says a create's 400 invalid_args covers
// "billing issues" without naming the text; these are the words such a
// message uses (our choice, SOURCES.md).
func billingText(m string) bool {
	for _, w := range []string{"billing", "balance", "credit", "payment", "insufficient funds"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
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
	// its Retry-After when vast sends one (at most a minute), else the
	// pacer's backoff; a 5xx waits MinBackoff (default 1 s) or its
	// Retry-After.
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

	qmu   sync.Mutex
	quota time.Time // search quota: no search before this
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
		if k.ep == EpSearch {
			if until := c.QuotaUntil(); !until.IsZero() {
				return &APIError{Op: k.op, Call: k.method + " " + k.path, Status: http.StatusTooManyRequests, Code: "search_quota_exceeded",
					Msg: "(not sent: the quota vast reported has not reset)", Until: until}
			}
		}
		done, err := c.pacer.Wait(ctx, k.ep)
		if err != nil {
			return fmt.Errorf("vast %s: %w", k.op, err)
		}
		ans, err := c.once(ctx, timeout, k.method, u.String(), payload)
		status := ans.status
		var final error
		if err != nil {
			final = fmt.Errorf("vast %s: %w", k.op, err)
		} else if status/100 != 2 {
			// vast's text could quote the key it refused: never pass it on.
			// (scrubbed before cutting, so no prefix of it survives either).
			data := bytes.ReplaceAll(ans.body, []byte(c.cfg.Key.Reveal()), []byte("[api key]"))
			final = &APIError{Op: k.op, Call: k.method + " " + k.path, Status: status, Msg: errorText(data), Code: errorCode(data)}
		}
		ra, hasRA := retryAfter(ans.header, c.cfg.Now())
		switch {
		case errors.Is(final, ErrQuota):
			c.quotaHit(final.(*APIError), ans.header)
		case status == http.StatusTooManyRequests && hasRA:
			c.pacer.Delay(k.ep, min(ra, maxRetryAfter)) // a longer one fails this call; it holds no later one longer
		case status == http.StatusTooManyRequests:
			c.learnThreshold(k, ans.body)
			wait := c.pacer.Limited(k.ep)
			c.cfg.Log.Info("vast rate limit, backing off", "op", k.op, "attempt", attempt+1, "wait", wait.String())
		default:
			c.pacer.OK(k.ep)
		}
		if err == nil && status/100 >= 5 && k.pol.retry(status, false) {
			c.pacer.Delay(k.ep, max(c.cfg.MinBackoff, min(ra, maxRetryAfter))) // 5xx: retry soon, a few times
		}
		done()
		if final == nil {
			if k.out == nil {
				return nil
			}
			if err := json.Unmarshal(ans.body, k.out); err != nil {
				return fmt.Errorf("vast %s: decode answer: %w", k.op, err)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("vast %s: %w", k.op, ctx.Err())
		}
		if attempt >= c.cfg.Retries || !k.pol.retry(status, err != nil) || errors.Is(final, ErrQuota) {
			return final
		}
		if hasRA && retryAfterHonoured(status) {
			// vast says when: wait that long, but not past a minute (the
			// CLI's cap) nor past what the caller gave this call.
			if ra > maxRetryAfter {
				return fmt.Errorf("%w (vast asks to retry after %s, more than %s: not retried)", final, ra, maxRetryAfter)
			}
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < ra {
				return fmt.Errorf("%w (vast asks to retry after %s, past this call's deadline: not retried)", final, ra)
			}
			c.cfg.Log.Info("vast asks to retry later", "op", k.op, "status", status, "attempt", attempt+1, "retry_after", ra.String())
			continue
		}
		// The wait is the pacer's next slot for this endpoint.
		if status != http.StatusTooManyRequests {
			c.cfg.Log.Warn("vast call failed, retrying", "op", k.op, "status", status, "attempt", attempt+1, "err", final)
		}
	}
}

// maxRetryAfter is the longest Retry-After honoured; a longer one fails
// the call (the newest CLI's rule, SOURCES.md).
const maxRetryAfter = time.Minute

// retryAfterHonoured: the statuses whose Retry-After the newest CLI reads.
func retryAfterHonoured(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Duration(min(n, 1<<32)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// threshold is the number in vast's 429 text "…endpoint threshold=4.5".
var threshold = regexp.MustCompile(`threshold\s*=\s*([0-9]+(?:\.[0-9]+)?)`)

// learnThreshold raises the endpoint's interval to the threshold vast's 429
// names, in seconds (vast's limits may be stricter than the reference).
func (c *Client) learnThreshold(k call, body []byte) {
	m := threshold.FindSubmatch(body)
	if m == nil {
		return
	}
	sec, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil || sec <= 0 || sec > 600 {
		return
	}
	if c.pacer.Raise(k.ep, time.Duration(sec*float64(time.Second))) {
		c.cfg.Log.Warn("vast names a stricter limit than rayvast kept; following it", "op", k.op, "interval_s", sec)
	}
}

// quotaHit records a daily search quota: no search until it resets, at
// X-RateLimit-Reset (seconds since the epoch, or seconds from now) else
// the next midnight UTC.
func (c *Client) quotaHit(e *APIError, h http.Header) {
	now := c.cfg.Now()
	e.Until = nextMidnightUTC(now)
	if v, err := strconv.ParseFloat(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 64); err == nil && v > 0 {
		if v > 1e9 {
			e.Until = time.Unix(int64(v), 0)
		} else if v <= 48*3600 {
			e.Until = now.Add(time.Duration(v * float64(time.Second)))
		}
	}
	c.qmu.Lock()
	first := c.quota.IsZero()
	c.quota = e.Until
	c.qmu.Unlock()
	if first {
		c.cfg.Log.Error("vast: the account's daily search quota is used up; no offer search until it resets", "until", e.Until.UTC().Format(time.RFC3339))
	}
}

func nextMidnightUTC(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// QuotaUntil is when vast's daily search quota resets, zero when no quota
// answer stands.
func (c *Client) QuotaUntil() time.Time {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if !c.quota.IsZero() && !c.cfg.Now().Before(c.quota) {
		c.quota = time.Time{}
		c.cfg.Log.Info("vast: the daily search quota has reset; searching again")
	}
	return c.quota
}

// maxAnswer bounds an answer body (an instance list of a large account is
// well under this).
const maxAnswer = 16 << 20

// answer is one HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (c *Client) once(ctx context.Context, timeout time.Duration, method, u string, payload []byte) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return answer{header: http.Header{}}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Key.Reveal())
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return answer{header: http.Header{}}, scrubURLError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return answer{status: resp.StatusCode, header: resp.Header}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}, nil
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
