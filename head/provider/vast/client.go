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
	"strconv"
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
}

func (e *APIError) Error() string {
	return fmt.Sprintf("vast %s: HTTP %d: %s", e.Op, e.Status, e.Msg)
}

// Unwrap makes a 404 match ErrNotFound.
func (e *APIError) Unwrap() error {
	if e.Status == http.StatusNotFound {
		return ErrNotFound
	}
	return nil
}

// ClientConfig builds a Client.
type ClientConfig struct {
	BaseURL string        // default DefaultBaseURL
	Key     secret.String // the API key: sent as a Bearer token, never logged
	HTTP    *http.Client  // default: 30 s timeout
	Log     *slog.Logger
	// Sleep waits between attempts; tests replace it. Default: a timer that
	// honours ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Retries bounds the attempts after the first (default 6). 429s back off
	// from MinBackoff doubling to MaxBackoff (defaults 1 s and 30 s): vast
	// sends no Retry-After.
	Retries                int
	MinBackoff, MaxBackoff time.Duration
}

// Client talks to vast's REST API v0.
type Client struct {
	cfg  ClientConfig
	base *url.URL
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
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Sleep == nil {
		cfg.Sleep = ctxsleep.Sleep
	}
	if cfg.Retries <= 0 {
		cfg.Retries = 6
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	return &Client{cfg: cfg, base: u}, nil
}

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

// do sends one API call with retries and decodes a 2xx JSON answer into out.
func (c *Client) do(ctx context.Context, op, method, path string, q url.Values, body, out any, pol retryPolicy) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("vast %s: encode: %w", op, err)
		}
	}
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = q.Encode()
	backoff := c.cfg.MinBackoff
	for attempt := 0; ; attempt++ {
		status, data, err := c.once(ctx, method, u.String(), payload)
		if err == nil && status/100 == 2 {
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("vast %s: decode answer: %w", op, err)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("vast %s: %w", op, ctx.Err())
		}
		var final error
		if err != nil {
			final = fmt.Errorf("vast %s: %w", op, err)
		} else {
			// vast's text could quote the key it refused: never pass it on.
			// (scrubbed before cutting, so no prefix of it survives either).
			data = bytes.ReplaceAll(data, []byte(c.cfg.Key.Reveal()), []byte("[api key]"))
			final = &APIError{Op: op, Status: status, Msg: errorText(data)}
		}
		if attempt >= c.cfg.Retries || !pol.retry(status, err != nil) {
			return final
		}
		wait := backoff
		if status != http.StatusTooManyRequests {
			wait = c.cfg.MinBackoff // 5xx: retry soon, a few times
		}
		c.cfg.Log.Warn("vast call failed, retrying", "op", op, "status", status, "attempt", attempt+1, "wait", wait.String(), "err", final)
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("vast %s: %w", op, err)
		}
		if status == http.StatusTooManyRequests {
			backoff = min(backoff*2, c.cfg.MaxBackoff)
		}
	}
}

// maxAnswer bounds an answer body (an instance list of a large account is
// well under this).
const maxAnswer = 16 << 20

func (c *Client) once(ctx context.Context, method, u string, payload []byte) (int, []byte, error) {
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

// Offer is one search result (the fields rayvast uses).
type Offer struct {
	ID        int64   `json:"id"`
	MachineID int64   `json:"machine_id"`
	HostID    int64   `json:"host_id"`
	GPUName   string  `json:"gpu_name"`
	NumGPUs   int     `json:"num_gpus"`
	DPHTotal  float64 `json:"dph_total"`
	Rentable  bool    `json:"rentable"`
	Verified  bool    `json:"verified"`
}

// Query is an offer search. Zero fields are left out.
type Query struct {
	GPUName        string
	NumGPUs        int
	MaxDPH         float64 // $/hour, 0 = any
	ExcludeHosts   []int64
	ExcludeMachine []int64
	Limit          int
}

// filter is the JSON query of vast's search: {"field": {"op": value}, …}.
func (q Query) filter() map[string]any {
	f := map[string]any{
		"rentable": map[string]any{"eq": true},
		"rented":   map[string]any{"eq": false},
		"num_gpus": map[string]any{"eq": q.NumGPUs},
		"order":    [][]string{{"dph_total", "asc"}},
		"type":     "on-demand",
	}
	if q.GPUName != "" {
		f["gpu_name"] = map[string]any{"eq": q.GPUName}
	}
	if q.MaxDPH > 0 {
		f["dph_total"] = map[string]any{"lte": q.MaxDPH}
	}
	if len(q.ExcludeHosts) > 0 {
		f["host_id"] = map[string]any{"notin": q.ExcludeHosts}
	}
	if len(q.ExcludeMachine) > 0 {
		f["machine_id"] = map[string]any{"notin": q.ExcludeMachine}
	}
	if q.Limit > 0 {
		f["limit"] = q.Limit
	}
	return f
}

// SearchOffers asks GET /api/v0/bundles/?q=<json>. The answer is filtered
// again here (vast may ignore a filter it does not know): wrong GPU, count,
// price, or an excluded host or machine never comes back.
func (c *Client) SearchOffers(ctx context.Context, q Query) ([]Offer, error) {
	qs, err := json.Marshal(q.filter())
	if err != nil {
		return nil, err
	}
	var ans struct {
		Offers []Offer `json:"offers"`
	}
	if err := c.do(ctx, "search offers", http.MethodGet, "/api/v0/bundles/", url.Values{"q": {string(qs)}}, nil, &ans, idempotent); err != nil {
		return nil, err
	}
	hosts, machines := set(q.ExcludeHosts), set(q.ExcludeMachine)
	out := ans.Offers[:0]
	for _, o := range ans.Offers {
		switch {
		case q.GPUName != "" && o.GPUName != q.GPUName,
			o.NumGPUs != q.NumGPUs,
			q.MaxDPH > 0 && o.DPHTotal > q.MaxDPH,
			hosts[o.HostID], machines[o.MachineID]:
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

func set(ids []int64) map[int64]bool {
	m := make(map[int64]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// CreateRequest is the body of PUT /api/v0/asks/{offer}/.
type CreateRequest struct {
	Image         string            `json:"image"`
	Label         string            `json:"label"`
	Disk          float64           `json:"disk,omitempty"`
	Runtype       string            `json:"runtype"`
	Env           map[string]string `json:"env"`
	Entrypoint    string            `json:"entrypoint,omitempty"`
	Args          []string          `json:"args,omitempty"`
	TargetState   string            `json:"target_state,omitempty"`
	CancelUnavail bool              `json:"cancel_unavail"`
}

// CreateInstance accepts an offer; it returns the new instance ID.
func (c *Client) CreateInstance(ctx context.Context, offerID int64, req CreateRequest) (int64, error) {
	var ans struct {
		Success     bool  `json:"success"`
		NewContract int64 `json:"new_contract"`
	}
	op := "create instance"
	if err := c.do(ctx, op, http.MethodPut, "/api/v0/asks/"+strconv.FormatInt(offerID, 10)+"/", nil, req, &ans, notIdempotent); err != nil {
		return 0, err
	}
	if !ans.Success || ans.NewContract == 0 {
		return 0, fmt.Errorf("vast %s: offer %d: answer without success/new_contract", op, offerID)
	}
	return ans.NewContract, nil
}

// Instance is what rayvast reads of one instance.
type Instance struct {
	ID           int64   `json:"id"`
	ActualStatus *string `json:"actual_status"`
	Label        *string `json:"label"`
	PublicIPAddr string  `json:"public_ipaddr"`
	MachineID    int64   `json:"machine_id"`
	HostID       int64   `json:"host_id"`
	NumGPUs      int     `json:"num_gpus"`
}

// Status is actual_status ("" while vast provisions it).
func (i Instance) Status() string {
	if i.ActualStatus == nil {
		return ""
	}
	return *i.ActualStatus
}

// LabelText is the label ("" when null).
func (i Instance) LabelText() string {
	if i.Label == nil {
		return ""
	}
	return *i.Label
}

// ShowInstance asks GET /api/v0/instances/{id}/; ErrNotFound when vast
// answers 404 or an empty "instances".
func (c *Client) ShowInstance(ctx context.Context, id int64) (Instance, error) {
	var ans struct {
		Instances *Instance `json:"instances"`
	}
	if err := c.do(ctx, "show instance", http.MethodGet, "/api/v0/instances/"+strconv.FormatInt(id, 10)+"/", nil, nil, &ans, idempotent); err != nil {
		return Instance{}, err
	}
	if ans.Instances == nil || ans.Instances.ID == 0 {
		return Instance{}, fmt.Errorf("vast show instance %d: %w", id, ErrNotFound)
	}
	return *ans.Instances, nil
}

// ListInstances asks GET /api/v0/instances/.
func (c *Client) ListInstances(ctx context.Context) ([]Instance, error) {
	var ans struct {
		Instances []Instance `json:"instances"`
	}
	if err := c.do(ctx, "list instances", http.MethodGet, "/api/v0/instances/", nil, nil, &ans, idempotent); err != nil {
		return nil, err
	}
	return ans.Instances, nil
}

// DestroyInstance asks DELETE /api/v0/instances/{id}/. An instance already
// gone (404) is not an error.
func (c *Client) DestroyInstance(ctx context.Context, id int64) error {
	err := c.do(ctx, "destroy instance", http.MethodDelete, "/api/v0/instances/"+strconv.FormatInt(id, 10)+"/", nil, nil, nil, idempotent)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
