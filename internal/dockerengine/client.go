// Package dockerengine is a small client for the Docker Engine API over its
// Unix socket, written on net/http alone (no Docker SDK): the containers,
// networks and images that rayvast's docker provider, `head demo` and the
// end-to-end suite need, and nothing else.
package dockerengine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultSocket is where the Docker Engine listens on Linux.
const DefaultSocket = "/var/run/docker.sock"

// APIVersion is the version this client is written against: Docker 20.10
// speaks up to 1.41 and every call here exists in it. An Engine whose
// minimum is higher (Docker 29 requires 1.44) is spoken to at its minimum:
// the calls and fields used here did not change.
const APIVersion = "1.41"

// ErrNotFound is returned when the Engine answers 404 (no such container,
// network or image).
var ErrNotFound = errors.New("not found")

// Client talks to one Docker Engine.
type Client struct {
	http *http.Client

	once sync.Once
	base string // http://docker/v1.41, set by negotiate
}

// New returns a client for the Engine at socket ("" = DefaultSocket). It does
// not connect; call Version to check the Engine is there.
func New(socket string) *Client {
	if socket == "" {
		socket = DefaultSocket
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    4,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{http: &http.Client{Transport: tr}}
}

// negotiate picks the API version once: APIVersion, or the Engine's minimum
// when that is higher. If the Engine cannot be asked, APIVersion stays and
// the call itself reports the problem.
func (c *Client) negotiate(ctx context.Context) {
	c.once.Do(func() {
		use := APIVersion
		if v, err := c.Version(ctx); err == nil && versionLess(APIVersion, v.MinAPIVersion) {
			use = v.MinAPIVersion
		}
		c.base = "http://docker/v" + use
	})
}

// versionLess compares "major.minor" API versions.
func versionLess(a, b string) bool {
	parse := func(s string) (int, int) {
		maj, min, _ := strings.Cut(s, ".")
		x, _ := strconv.Atoi(maj)
		y, _ := strconv.Atoi(min)
		return x, y
	}
	am, an := parse(a)
	bm, bn := parse(b)
	return am < bm || am == bm && an < bn
}

// APIError is a non-2xx answer of the Engine.
type APIError struct {
	Op      string
	Status  int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("docker %s: %d %s", e.Op, e.Status, e.Message)
}

// Unwrap makes errors.Is(err, ErrNotFound) true for a 404.
func (e *APIError) Unwrap() error {
	if e.Status == http.StatusNotFound {
		return ErrNotFound
	}
	return nil
}

// do sends one request and returns the response when its status is 2xx; the
// caller closes the body. body may be nil, an io.Reader (sent as is, with
// contentType) or a value sent as JSON.
func (c *Client) do(ctx context.Context, op, method, path string, q url.Values, body any, contentType string) (*http.Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("docker %s: encode: %w", op, err)
		}
		rd = bytes.NewReader(buf)
		contentType = "application/json"
	}
	c.negotiate(ctx)
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("docker %s: %w", op, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("docker %s: %w", op, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var m struct {
			Message string `json:"message"`
		}
		text := strings.TrimSpace(string(msg))
		if json.Unmarshal(msg, &m) == nil && m.Message != "" {
			text = m.Message
		}
		return nil, &APIError{Op: op, Status: resp.StatusCode, Message: text}
	}
	return resp, nil
}

// call is do for requests whose answer is JSON decoded into out (nil: drained).
func (c *Client) call(ctx context.Context, op, method, path string, q url.Values, body, out any) error {
	resp, err := c.do(ctx, op, method, path, q, body, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("docker %s: decode: %w", op, err)
	}
	return nil
}

// Version is the Engine's GET /version answer (the fields we use).
type Version struct {
	Version       string `json:"Version"`
	APIVersion    string `json:"ApiVersion"`
	MinAPIVersion string `json:"MinAPIVersion"`
	Os            string `json:"Os"`
	Arch          string `json:"Arch"`
}

// Version asks the Engine who it is; it is the cheap "is Docker there" call.
func (c *Client) Version(ctx context.Context) (Version, error) {
	var v Version
	// Unversioned path: works whatever API version the Engine speaks.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/version", nil)
	if err != nil {
		return v, fmt.Errorf("docker version: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return v, fmt.Errorf("docker version: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, &APIError{Op: "version", Status: resp.StatusCode}
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return v, fmt.Errorf("docker version: decode: %w", err)
	}
	return v, nil
}

// labelFilter builds the `filters` query value matching every label given
// ("key" or "key=value").
func labelFilter(labels ...string) string {
	f := map[string][]string{"label": labels}
	b, _ := json.Marshal(f)
	return string(b)
}
