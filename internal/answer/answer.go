// Package answer keeps what a server tells an HTTP client apart from what
// it logs: a handler returns an *Error carrying the status and the client's
// body, plus the cause for the log; one wrapper writes it and logs once.
// The head (through Func) and the agent's guest API (with its own log
// level and headers) both answer errors through it.
package answer

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"path"

	"github.com/rayvast/rayvast/internal/wire"
)

// Error is a failed request: Status and Body go to the client, Cause and
// Reason to the log only.
type Error struct {
	Status int
	Body   any               // JSON body; nil = wire.ErrorBody{Error: http.StatusText}
	Reason string            // short, for the log
	Cause  error             // for the log; never holds a secret
	Header map[string]string // extra response headers, optional
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

// As is err as an *Error; any other error is a 500 whose cause it is, so
// an unplanned failure tells the client nothing of itself.
func As(err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Reason: "internal", Cause: err}
	}
	return e
}

// ClientBody is what the client is sent.
func (e *Error) ClientBody() any {
	if e.Body == nil {
		return wire.ErrorBody{Error: http.StatusText(e.Status)}
	}
	return e.Body
}

// Func adapts a handler that returns an error. Errors are written and
// logged once, at warn for client errors and error for server errors.
func Func(log *slog.Logger, fn func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		e := As(err)
		level := slog.LevelWarn
		if e.Status >= 500 {
			level = slog.LevelError
		}
		attrs := []any{"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "status", e.Status, "reason", e.Reason}
		if e.Cause != nil {
			attrs = append(attrs, "err", e.Cause.Error())
		}
		log.Log(r.Context(), level, "request failed", attrs...)
		for k, v := range e.Header {
			w.Header().Set(k, v)
		}
		JSON(w, e.Status, e.ClientBody())
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
// 413 when it is larger (whatever it holds, so a declared length over the
// limit is refused unread and a malformed body is read to its end, at most
// the limit, before it is called malformed), 400 when it is malformed.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	tooLarge := Errorf(http.StatusRequestEntityTooLarge, "too_large", "body over 64 KiB", nil)
	if r.ContentLength > wire.MaxBody {
		return tooLarge
	}
	body := http.MaxBytesReader(w, r.Body, wire.MaxBody)
	err := wire.Decode(body, wire.MaxBody, v)
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wire.ErrTooLarge) || errors.As(err, &mbe):
		return tooLarge
	}
	if _, derr := io.Copy(io.Discard, body); errors.As(derr, &mbe) {
		return tooLarge
	}
	return Errorf(http.StatusBadRequest, "bad_request", err.Error(), nil)
}

// CleanPathsOnly answers 404 to a request whose path is not in clean form
// ("//x", "/./x", "/a/../x", a trailing slash), where http.ServeMux would
// redirect to the cleaned path: a path the table does not name is 404.
func CleanPathsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || p != path.Clean(p) {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// SourceIP is the canonical source address of a request ("" if unknown).
func SourceIP(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	return ap.Addr().Unmap().String()
}
