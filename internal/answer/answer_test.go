package answer

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestFunc: an *Error answers its status and body and logs its cause once;
// any other error is a 500 that tells the client nothing of its cause.
func TestFunc(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		body, logs string
	}{
		{"answer error", Errorf(http.StatusBadRequest, "bad_request", "no instance id", errors.New("cause-7f3a")),
			400, `{"error":"bad_request","reason":"no instance id"}`, "level=WARN"},
		{"plain error", errors.New("cause-7f3a"), 500, `{"error":"Internal Server Error"}`, "level=ERROR"},
		{"no body", &Error{Status: http.StatusNotFound, Reason: "gone", Cause: errors.New("cause-7f3a")}, 404, `{"error":"Not Found"}`, "level=WARN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := Func(slog.New(slog.NewTextHandler(&logs, nil)), func(http.ResponseWriter, *http.Request) error { return tc.err })
			rec := httptest.NewRecorder()
			h(rec, httptest.NewRequest("GET", "/x", nil))
			if rec.Code != tc.status || rec.Body.String() != tc.body {
				t.Errorf("got %d %s, want %d %s", rec.Code, rec.Body, tc.status, tc.body)
			}
			if n := strings.Count(logs.String(), "request failed"); n != 1 || !strings.Contains(logs.String(), "cause-7f3a") || !strings.Contains(logs.String(), tc.logs) {
				t.Errorf("logged %d times, want once at %s with the cause: %s", n, tc.logs, logs.String())
			}
		})
	}
}

// TestDecode: an over-limit body is 413 and a malformed one 400.
func TestDecode(t *testing.T) {
	var v struct{ A int }
	for _, tc := range []struct {
		body   string
		status int
	}{
		{`{"A":1}`, 0},
		{`{"A":`, 400},
		{`{"B":1}`, 400},
		{`{"A":"` + strings.Repeat("x", 70<<10) + `"}`, 413},
	} {
		rec := httptest.NewRecorder()
		err := Decode(rec, httptest.NewRequest("POST", "/", strings.NewReader(tc.body)), &v)
		got := 0
		if err != nil {
			got = As(err).Status
		}
		if got != tc.status {
			t.Errorf("Decode(%.20q): status %d (%v), want %d", tc.body, got, err, tc.status)
		}
	}
}
