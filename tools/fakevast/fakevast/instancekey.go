package fakevast

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
)

// Per-instance keys. The create answer's instance_api_key is given to the
// container as CONTAINER_API_KEY and "can only start, stop, or destroy
// that specific instance" (api-reference/hello-world.mdx); the container
// also shows its own instance with it (`vastai show instance $CONTAINER_ID
// --api-key $CONTAINER_API_KEY`, guides/instances/docker-environment.mdx).
// The fake lets such a key DELETE and GET /api/v0/instances/{own id}/ and
// nothing else; anything else is answered as a wrong key is (404
// auth_error): vast documents no answer of its own for a key used outside
// its scope.

type keyKind int

const (
	accountKey keyKind = iota + 1
	instanceKey
)

type keyCtx struct{}

// instanceKeyAllows says tok is the key of the instance the request names
// and the request is one the key may make. The caller holds s.mu.
func (s *Server) instanceKeyAllows(tok string, r *http.Request) bool {
	if tok == "" {
		return false
	}
	if r.Method != http.MethodDelete && r.Method != http.MethodGet {
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v0/instances/")
	if !ok {
		return false
	}
	id, err := strconv.ParseInt(strings.TrimSuffix(rest, "/"), 10, 64)
	if err != nil || !strings.HasSuffix(rest, "/") {
		return false
	}
	in := s.instances[id]
	return in != nil && in.APIKey != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(in.APIKey)) == 1
}

// byInstanceKey says the request came with an instance's own key.
func byInstanceKey(r *http.Request) bool {
	k, _ := r.Context().Value(keyCtx{}).(keyKind)
	return k == instanceKey
}

func withKeyKind(r *http.Request, k keyKind) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), keyCtx{}, k))
}

// RefuseInstanceKey makes vast refuse instance id's own key from now on
// with status (401 or 403: the answers vast's reference gives for a key
// it does not accept, show_user.yaml's 401 "Unauthorized access due to
// invalid or missing authentication token"; which one a revoked instance
// key gets is not documented).
func (s *Server) RefuseInstanceKey(id int64, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.instances[id]; in != nil {
		in.KeyRefused = status
	}
}

// refusedKey is the status that refuses the instance key of the request
// (0: none). The caller holds s.mu and checked instanceKeyAllows.
func (s *Server) refusedKey(r *http.Request) int {
	rest, _ := strings.CutPrefix(r.URL.Path, "/api/v0/instances/")
	id, _ := strconv.ParseInt(strings.TrimSuffix(rest, "/"), 10, 64)
	if in := s.instances[id]; in != nil {
		return in.KeyRefused
	}
	return 0
}

// InstanceKey is instance id's CONTAINER_API_KEY ("" when there is none).
func (s *Server) InstanceKey(id int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.instances[id]; in != nil {
		return in.APIKey
	}
	return ""
}

// invoices answers GET /api/v1/invoices/ (show_invoices.yaml), a
// billing_read call (permissions.mdx): an empty list for a full key. A key
// without billing_read (Config.ScopedKey) gets 401 with vast's error body
// shape: vast documents no answer of its own for a call outside a key's
// permissions, so the status is the fake's choice. An instance key never
// gets here (guard).
func (s *Server) invoices(w http.ResponseWriter, r *http.Request) {
	if !r.URL.Query().Has("select_filters") {
		fail(w, http.StatusBadRequest, "invalid_args", "select_filters is required")
		return
	}
	if s.cfg.ScopedKey {
		fail(w, http.StatusUnauthorized, "unauthorized", "API key lacks permission billing_read")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"invoices": []any{}})
}
