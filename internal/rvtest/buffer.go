package rvtest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that several goroutines may write at once: the
// log sink of tests that grep a server's output for secrets. The zero
// value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
