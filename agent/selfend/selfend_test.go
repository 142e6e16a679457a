package selfend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/agent/heartbeat"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var (
	down     = backoff.Transient("post", fmt.Errorf("connection refused"))
	unknown  = &heartbeat.StatusError{Op: "heartbeat", Code: 403, Word: wire.ErrForbidden, Unknown: true}
	refused  = &heartbeat.StatusError{Op: "heartbeat", Code: 403, Word: wire.ErrForbidden}
	overload = backoff.Transient("heartbeat", &heartbeat.StatusError{Op: "heartbeat", Code: 503, Word: "busy"})
)

// TestWatchEndsAtTheLimit: heartbeats that go unanswered end the node once
// the limit has passed since the last answer, not a moment before; an
// answer inside the window (a head restarted in time) starts it again, so
// the node is kept.
func TestWatchEndsAtTheLimit(t *testing.T) {
	c := &clock{time.Unix(1e9, 0)}
	w := NewWatch(10*time.Minute, c.now)
	for i := 0; i < 9; i++ { // the head down for 9 minutes
		c.t = c.t.Add(time.Minute)
		if end, _ := w.Beat(down); end {
			t.Fatalf("ended after %d minutes unheard, limit 10", i+1)
		}
	}
	c.t = c.t.Add(30 * time.Second)
	if end, _ := w.Beat(nil); end { // the head is back
		t.Fatal("an answer ended the node")
	}
	for i := 0; i < 9; i++ {
		c.t = c.t.Add(time.Minute)
		for _, err := range []error{down, refused, overload} {
			if end, _ := w.Beat(err); end {
				t.Fatalf("ended %d minutes after the head came back (%v)", i+1, err)
			}
		}
	}
	c.t = c.t.Add(time.Minute)
	if end, why := w.Beat(down); !end || why != WhyUnheard {
		t.Errorf("10 minutes unheard: end %v %q, want true %q", end, why, WhyUnheard)
	}
	if got := w.Unheard(); got != 10*time.Minute {
		t.Errorf("Unheard %v, want 10m", got)
	}
}

// TestWatchStartsAtEnrollment: a node whose head never answers a single
// heartbeat still ends itself, limit after the watch started.
func TestWatchStartsAtEnrollment(t *testing.T) {
	c := &clock{time.Unix(1e9, 0)}
	w := NewWatch(time.Minute, c.now)
	c.t = c.t.Add(time.Minute)
	if end, _ := w.Beat(down); !end {
		t.Error("never heard for the limit: not ended")
	}
}

// TestWatchUnknownNodeAtOnce: the head's 403 saying unknown node ends the node at
// the first such answer; a 403 of another cause (forbidden) does not.
func TestWatchUnknownNodeAtOnce(t *testing.T) {
	c := &clock{time.Unix(1e9, 0)}
	w := NewWatch(time.Hour, c.now)
	if end, _ := w.Beat(refused); end {
		t.Error("403 forbidden ended the node at once")
	}
	if end, why := w.Beat(fmt.Errorf("wrapped: %w", unknown)); !end || why != WhyUnknownNode {
		t.Errorf("403 unknown_node: end %v %q, want true %q", end, why, WhyUnknownNode)
	}
}

// TestWatchZeroIsNever: limit 0 (the config's 0, or a head that names no
// limit) never ends the node, for either reason.
func TestWatchZeroIsNever(t *testing.T) {
	c := &clock{time.Unix(1e9, 0)}
	w := NewWatch(0, c.now)
	c.t = c.t.Add(1000 * time.Hour)
	for _, err := range []error{down, unknown} {
		if end, _ := w.Beat(err); end {
			t.Errorf("limit 0 ended the node on %v", err)
		}
	}
}

// TestVastDestroyRetriedWithOwnKey: the vast ender calls DELETE
// /api/v0/instances/{id}/ with the instance's key as Bearer, retries a
// refused destroy (200 success false) and a 429 until vast says success,
// and the log says so without the key.
func TestVastDestroyRetriedWithOwnKey(t *testing.T) {
	const key = "d15a0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"
	var mu sync.Mutex
	var calls []string
	answers := []func(w http.ResponseWriter){
		func(w http.ResponseWriter) {
			_ = json.NewEncoder(w).Encode(map[string]any{"success": false, "msg": "try again"})
		},
		func(w http.ResponseWriter) { w.WriteHeader(429) },
		func(w http.ResponseWriter) { _ = json.NewEncoder(w).Encode(map[string]any{"success": true}) },
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		answers[min(len(calls)-1, len(answers)-1)](w)
	}))
	defer srv.Close()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var slept []time.Duration
	retry := backoff.RetryConfig{Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
		Policy: backoff.Policy{Base: time.Second, Max: time.Minute}, MaxElapsed: time.Hour}
	v := Vast{BaseURL: srv.URL, InstanceID: "31000007", Key: secret.New(key)}
	if err := Run(context.Background(), v, WhyUnheard, 31*time.Minute, retry, log); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := "DELETE /api/v0/instances/31000007/ Bearer " + key
	if len(calls) != 3 || calls[0] != want || calls[2] != want {
		t.Errorf("calls %q, want 3 × %q", calls, want)
	}
	if len(slept) != 2 {
		t.Errorf("slept %v, want 2 backoffs", slept)
	}
	if !strings.Contains(logs.String(), "own rental ended") {
		t.Errorf("log does not say the rental ended:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), key) {
		t.Error("the log holds CONTAINER_API_KEY")
	}
}

// TestVastDestroyGivesUp: a destroy vast keeps failing (503) is retried
// until MaxElapsed, then Run says so; a key vast refuses with 404
// auth_error (its answer to a wrong key) is ErrKeyRefused at the first
// answer, not retried.
func TestVastDestroyGivesUp(t *testing.T) {
	for _, tc := range []struct {
		status      int
		word        string
		wantRefused bool
	}{{503, "unavailable", false}, {404, "auth_error", true}} {
		calls := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls++
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(`{"success":false,"error":"` + tc.word + `","msg":"no"}`))
		}))
		c := &clock{time.Unix(1e9, 0)}
		retry := backoff.RetryConfig{Now: c.now, Sleep: func(_ context.Context, d time.Duration) error { c.t = c.t.Add(d); return nil },
			Policy: backoff.Policy{Base: time.Second, Max: time.Minute}, MaxElapsed: 10 * time.Minute}
		err := Run(context.Background(), Vast{BaseURL: srv.URL, InstanceID: "1", Key: secret.New("k")}, WhyUnknownNode, 0, retry, nil)
		srv.Close()
		switch {
		case err == nil || !strings.Contains(err.Error(), tc.word):
			t.Errorf("%d %s: Run: %v, want giving up naming %s", tc.status, tc.word, err, tc.word)
		case errors.Is(err, ErrKeyRefused) != tc.wantRefused:
			t.Errorf("%d %s: Run: %v, want ErrKeyRefused %v", tc.status, tc.word, err, tc.wantRefused)
		case tc.wantRefused && calls != 1:
			t.Errorf("%d %s: asked vast %d times, want once (a refused key is not retried)", tc.status, tc.word, calls)
		case !tc.wantRefused && calls < 5:
			t.Errorf("%d %s: asked vast %d times in ten minutes, want it retried", tc.status, tc.word, calls)
		}
	}
}
