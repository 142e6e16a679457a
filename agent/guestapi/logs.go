package guestapi

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"sync"
)

// MaxLogTail is how much of a log's end /logs/<name> serves.
const MaxLogTail = 256 << 10

// LogSource is something /logs/<name> can show the tail of.
type LogSource interface {
	Tail(max int64) ([]byte, error)
}

// LogFile is a log kept in a file.
type LogFile string

// Tail returns the last max bytes of the file.
func (f LogFile) Tail(max int64) ([]byte, error) {
	fh, err := os.Open(string(f))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if off := fi.Size() - max; off > 0 {
		if _, err := fh.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(fh, max))
}

// LogRing keeps the last bytes written to it in memory: the standalone
// agent's own log, which has no file.
type LogRing struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewLogRing keeps at most max bytes.
func NewLogRing(max int) *LogRing { return &LogRing{max: max} }

// Write appends p, dropping the oldest bytes beyond the limit.
func (r *LogRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - r.max; over > 0 {
		r.buf = append([]byte(nil), r.buf[over:]...)
	}
	return len(p), nil
}

// Tail returns the last max bytes kept.
func (r *LogRing) Tail(max int64) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buf
	if int64(len(b)) > max {
		b = b[int64(len(b))-max:]
	}
	return bytes.Clone(b), nil
}

// serveLog answers /logs/<name>. Logs exist here only when public_logs is on
// (see mountLogs); a table name without a source is 404.
func (s *Server) serveLog(w http.ResponseWriter, name string) error {
	src, ok := s.logs[name]
	if !ok {
		return errNotFound
	}
	b, err := src.Tail(MaxLogTail)
	if err != nil {
		// Warn, not the refusal's Debug: the agent failed to read its own log.
		s.cfg.Log.Warn("read log failed", "log", name, "err", err)
		return errNotFound
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
	return nil
}
