// Package answer is the head's way of answering HTTP requests; the code is
// internal/answer, shared with the agent's guest API. This file forwards
// until head/enroll and head/nodeapi import internal/answer (issue 14).
package answer

import (
	"log/slog"
	"net/http"

	"github.com/rayvast/rayvast/internal/answer"
)

// Error is internal/answer's Error.
type Error = answer.Error

func Errorf(status int, code, reason string, cause error) *Error {
	return answer.Errorf(status, code, reason, cause)
}

func Func(log *slog.Logger, fn func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return answer.Func(log, fn)
}

func JSON(w http.ResponseWriter, status int, v any) { answer.JSON(w, status, v) }

func Decode(w http.ResponseWriter, r *http.Request, v any) error { return answer.Decode(w, r, v) }

func CleanPathsOnly(h http.Handler) http.Handler { return answer.CleanPathsOnly(h) }

func SourceIP(r *http.Request) string { return answer.SourceIP(r) }
