// Package answer keeps what the head tells an HTTP client apart from what it
// logs: a handler returns an *Error carrying the status and the client's
// body, plus the cause for the log; one wrapper writes it and logs once.
package answer

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/rayvast/rayvast/internal/wire"
)

// Error is a failed request: Status and Body go to the client, Cause and
// Reason to the log only.
type Error struct {
	Status int
	Body   any    // JSON body; nil = wire.ErrorBody{Error: http.StatusText}
	Reason string // short, for the log
	Cause  error  // for the log; never holds a secret
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Reason + ": " + e.Cause.Error()
	}
	return e.Reason
}

// Errorf is a shorthand for an error with a wire.ErrorBody.
func Errorf(status int, code, reason string, cause error) *Error {
	return &Error{Status: status, Body: wire.ErrorBody{Error: code, Reason: reason}, Reason: reason, Cause: cause}
}

// Func adapts a handler that returns an error. Errors are written and
// logged once, at warn for client errors and error for server errors.
func Func(log *slog.Logger, fn func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Status: http.StatusInternalServerError, Reason: "internal", Cause: err}
		}
		body := e.Body
		if body == nil {
			body = wire.ErrorBody{Error: http.StatusText(e.Status)}
		}
		level := slog.LevelWarn
		if e.Status >= 500 {
			level = slog.LevelError
		}
		attrs := []any{"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "status", e.Status, "reason", e.Reason}
		if e.Cause != nil {
			attrs = append(attrs, "err", e.Cause.Error())
		}
		log.Log(r.Context(), level, "request failed", attrs...)
		JSON(w, e.Status, body)
	}
}

// JSON writes v as the JSON answer with status.
func JSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"internal"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Decode reads a strict JSON body of at most wire.MaxBody bytes into v:
// 413 when it is larger, 400 when it is malformed.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, wire.MaxBody)
	err := wire.Decode(body, wire.MaxBody, v)
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wire.ErrTooLarge) || errors.As(err, &mbe):
		return Errorf(http.StatusRequestEntityTooLarge, "too_large", "body over 64 KiB", nil)
	default:
		return Errorf(http.StatusBadRequest, "bad_request", err.Error(), nil)
	}
}

// SourceIP is the canonical source address of a request ("" if unknown).
func SourceIP(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	return ap.Addr().Unmap().String()
}
