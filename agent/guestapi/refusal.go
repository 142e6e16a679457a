package guestapi

import (
	"net/http"

	"github.com/rayvast/rayvast/internal/answer"
	"github.com/rayvast/rayvast/internal/wire"
)

// The guest API answers errors through internal/answer, the head's error
// type, with its own bodies: {"error":<code>} and no reason, because
// strangers send most bad requests and the reason would help only them.
var (
	errNotFound = refusal(http.StatusNotFound, "not_found", nil)
	errMethod   = refusal(http.StatusMethodNotAllowed, "method_not_allowed", nil)
)

// refusal is an answer error with the guest API's body.
func refusal(status int, code string, cause error) *answer.Error {
	return &answer.Error{Status: status, Body: wire.ErrorBody{Error: code}, Reason: code, Cause: cause}
}

// unauthorized is the one 401 answer: the same bytes for every cause,
// which goes to the log only.
func unauthorized(cause error) *answer.Error {
	return refusal(http.StatusUnauthorized, "unauthorized", cause)
}

// handle adapts a handler that returns an error: the one place the guest
// API writes an error and logs it. Refusals log at Debug: anyone can send
// bad requests, and at Info each would write a line to the public
// container log. Server errors log at Error.
func (s *Server) handle(fn func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		e := answer.As(err)
		attrs := []any{"method", r.Method, "path", r.URL.Path, "status", e.Status, "reason", e.Reason}
		if e.Cause != nil {
			attrs = append(attrs, "err", e.Cause.Error())
		}
		if e.Status >= 500 {
			s.cfg.Log.Error("guest api failed", attrs...)
		} else {
			s.cfg.Log.Debug("guest api refused", attrs...)
		}
		if e.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", "Bearer") // docs/protocol.md §9
		}
		writeJSON(w, e.Status, e.ClientBody())
	}
}
