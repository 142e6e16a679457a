package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// Admin is a Cluster over the admin API: on the Unix socket (AdminSocket,
// what `head down` and external tools use) or in-process on the admin
// handler (AdminHandler, what `head serve` uses: the same code path without
// a socket round trip).
type Admin struct {
	HTTP *http.Client
	// EndWith, when set, ends candidates instead of DELETE, so the reason
	// is recorded (the admin API records "deleted").
	EndWith func(candidateID, reason string) error
}

// AdminSocket talks to the admin API on a Unix socket.
func AdminSocket(path string) *Admin {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Admin{HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// AdminHandler calls the admin handler in-process.
func AdminHandler(h http.Handler) *Admin {
	return &Admin{HTTP: &http.Client{Transport: handlerTransport{h}}}
}

// InProcess is what `head serve` uses: the admin handler for listing and
// creating, and the provider driver's End (so the reason is kept) for ending.
func InProcess(h http.Handler, end func(candidateID, reason string) (wire.Candidate, error)) *Admin {
	a := AdminHandler(h)
	a.EndWith = func(id, reason string) error { _, err := end(id, reason); return err }
	return a
}

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func (a *Admin) call(ctx context.Context, method, path string, body, out any, want int) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://admin"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("admin %s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("admin %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// Candidates implements Cluster.
func (a *Admin) Candidates(ctx context.Context) ([]wire.Candidate, error) {
	var cs []wire.Candidate
	return cs, a.call(ctx, http.MethodGet, "/v1/candidates", nil, &cs, http.StatusOK)
}

// Create implements Cluster. The join token in the answer is dropped at
// once: the head already gave it to its provider.
func (a *Admin) Create(ctx context.Context, nodeType string) (wire.Candidate, error) {
	var cr wire.CandidateCreated
	if err := a.call(ctx, http.MethodPost, "/v1/candidates", wire.CandidateRequest{NodeType: nodeType}, &cr, http.StatusCreated); err != nil {
		return wire.Candidate{}, err
	}
	return wire.Candidate{CandidateID: cr.CandidateID, NodeType: nodeType, State: wire.StatePending}, nil
}

// End implements Cluster.
func (a *Admin) End(ctx context.Context, candidateID, reason string) error {
	if a.EndWith != nil {
		return a.EndWith(candidateID, reason)
	}
	return a.call(ctx, http.MethodDelete, "/v1/candidates/"+url.PathEscape(candidateID), nil, nil, http.StatusNoContent)
}
