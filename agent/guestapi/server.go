package guestapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/wire"
)

// Handler returns the HTTP handler of one surface: remote (TCP, vsock:
// scopes from tokens and the host's anonymous grant) or local (the Unix
// socket: unauthenticated, all scopes, plus GetKey). Exported for tests and
// for callers bringing their own listener plumbing.
func (s *Server) Handler(local bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, found := guestauth.Lookup(r.URL.EscapedPath(), local)
		granted, err := s.grant(r, local)
		if !local {
			s.judgeConn(w, r, err == nil && len(r.Header.Values("Authorization")) > 0)
		}
		if err != nil {
			// Debug, like every refusal: anyone can send bad tokens, and at
			// Info each would write a line to the public container log.
			s.cfg.Log.Debug("guest api refused", "path", route.Path, "reason", err.Error())
			unauthorized(w)
			return
		}
		switch guestauth.Decide(route, found, granted, s.switches) {
		case guestauth.Unauthorized:
			s.cfg.Log.Debug("guest api refused", "found", found, "path", route.Path, "reason", "scope")
			unauthorized(w)
		case guestauth.NotMounted:
			writeError(w, http.StatusNotFound, "not_found")
		case guestauth.Allow:
			s.dispatch(w, r, route, granted)
		}
	})
}

// judgeConn keeps a connection whose request proved a token; any other is
// closed after this answer, so strangers hold no idle connection (see
// guardListener).
func (s *Server) judgeConn(w http.ResponseWriter, r *http.Request, authenticated bool) {
	g, _ := r.Context().Value(connKey{}).(*guardedConn)
	if authenticated && g != nil {
		g.markAuthenticated()
		return
	}
	w.Header().Set("Connection", "close")
}

type connKey struct{}

// grant is every scope on the local surface, else what the request proves.
func (s *Server) grant(r *http.Request, local bool) (guestauth.Scopes, error) {
	if local {
		return guestauth.ParseScopeList(scopeNames(guestauth.AllScopes))
	}
	return s.auth.Grant(r.Header.Values("Authorization"), s.cfg.Now())
}

func scopeNames(ss []guestauth.Scope) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// dispatch routes the judged route. It reads nothing of the path again.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, rt guestauth.Route, granted guestauth.Scopes) {
	switch rt.Kind {
	case guestauth.KindDashboard:
		if !methodIs(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		s.serveDashboard(w, granted)
	case guestauth.KindLogs:
		if !methodIs(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		s.serveLog(w, rt.Name)
	case guestauth.KindMetrics:
		if !methodIs(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		if !s.cfg.PublicSysinfo { // unmounted; Decide already said so, this is the belt
			writeError(w, http.StatusNotFound, "not_found")
			return
		}
		s.serveMetrics(w)
	case guestauth.KindPRPC:
		s.servePRPC(w, r, rt)
	default:
		unauthorized(w) // a row without a handler: fail closed
	}
}

func methodIs(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed")
	return false
}

// unauthorized is the one 401 answer: the same bytes for every cause.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", "Bearer")
	writeError(w, http.StatusUnauthorized, "unauthorized")
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, wire.ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// newHTTPServer bounds slow clients: anyone who can route to the node can
// connect.
func (s *Server) newHTTPServer(local bool) *http.Server {
	hs := &http.Server{
		Handler:           s.Handler(local),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if g := guardedOf(c); g != nil {
				return context.WithValue(ctx, connKey{}, g)
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if g := guardedOf(c); g != nil && st == http.StateActive {
				g.markStarted()
			}
		},
	}
	s.mu.Lock()
	s.servers = append(s.servers, hs)
	s.mu.Unlock()
	return hs
}

// ServeTCP serves the remote surface on l until Close. With a node identity
// it serves HTTPS with the node cert (it wraps l itself); without, plain
// HTTP. vsock listeners (ListenVsock) are served the same way.
func (s *Server) ServeTCP(l net.Listener) error {
	l = newGuardListener(l, s.cfg.Limits.withDefaults(s.cfg.TrustedIP))
	if s.id != nil {
		l = tls.NewListener(l, s.id.tlsConfig())
	}
	err := s.newHTTPServer(false).Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeUnix serves the local surface (unauthenticated, with GetKey) on a
// Unix socket at path, mode 0600, until Close. A stale socket at path is
// replaced; any other file there is an error.
func (s *Server) ServeUnix(path string) error {
	l, err := ListenUnix(path)
	if err != nil {
		return err
	}
	return s.serveLocal(l)
}

// serveLocal serves the local surface on an already open listener.
func (s *Server) serveLocal(l net.Listener) error {
	err := s.newHTTPServer(true).Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ListenUnix listens on a 0600 Unix socket at path.
func ListenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen unix %s: exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen unix %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen unix %s: %w", path, err)
	}
	// The socket is made with the umask's mode first; the state dir is 0700,
	// so nobody else can reach it in between.
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return l, nil
}

// Close stops every listener at once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, hs := range s.servers {
		errs = append(errs, hs.Close())
	}
	return errors.Join(errs...)
}

// Shutdown stops every listener gracefully, waiting for requests until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, hs := range s.servers {
		errs = append(errs, hs.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
