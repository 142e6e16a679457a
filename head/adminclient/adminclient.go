// Package adminclient speaks the head's admin API (docs/protocol.md §8)
// over the Unix socket STATE/admin.sock, one typed method per route, for
// the head's own commands (status, logs, up, down, demo) and the tests and
// tools that drive a running head. The head's reconcile loop calls the
// admin API's Go methods instead. The routes are spelled only here and in
// head/admin (routes_test.go keeps it so).
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// maxAnswer bounds what is read of one answer: lists of many candidates.
const maxAnswer = 16 << 20

// Client is an admin API client. Request URLs use the host "admin".
type Client struct {
	HTTP *http.Client
}

// Unix talks to the admin socket at path.
func Unix(path string, timeout time.Duration) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: 2 * time.Second}
		return d.DialContext(ctx, "unix", path)
	}}
	return &Client{HTTP: &http.Client{Transport: tr, Timeout: timeout}}
}

// do sends in (if not nil) as JSON, wants status want, and decodes the
// answer into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any, want int) error {
	data, err := c.send(ctx, method, path, in, want)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("admin %s %s: decode: %w", method, path, err)
	}
	return nil
}

// send sends in (if not nil) as JSON, wants status want, and returns the
// answer's body. Errors carry the head's answer, which never holds a
// secret (the one answer that does, Create's, is the wanted 201).
func (c *Client) send(ctx context.Context, method, path string, in any, want int) ([]byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://admin"+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("admin %s %s: read: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return nil, &StatusError{Method: method, Path: path, Status: resp.StatusCode, Answer: string(bytes.TrimSpace(data))}
	}
	return data, nil
}

// StatusError is an answer of the head with another status than the
// route's success: the head is up and refused (a caller that must tell it
// from a head that did not answer at all uses errors.As).
type StatusError struct {
	Method, Path string
	Status       int
	Answer       string // the head's error body, which never holds a secret
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("admin %s %s: HTTP %d: %s", e.Method, e.Path, e.Status, e.Answer)
}
