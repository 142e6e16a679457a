package mesh

import (
	"errors"
	"io"
	"net"
	"sync"
)

// copyBuf is the size of each direction's copy buffer: large enough that a
// bulk all_reduce moves in few reads, small enough for many streams. 128
// KiB rather than 256: a busy stream's agent RSS fell from ~611 to ~407
// KiB (BenchmarkMeshStreamMemory, issue 41's ≤ 600) with no difference in
// BenchmarkAllReduceThroughMesh that the shared 2-core machine could show.
const copyBuf = 128 << 10

var bufs = sync.Pool{New: func() any { b := make([]byte, copyBuf); return &b }}

// stream is a local connection and its far end, copied both ways.
type stream struct {
	peer      string
	a, b      net.Conn   // a: the local side, b: the TLS stream
	batch     *batchConn // under b
	closeOnce sync.Once
}

// close ends both sides at once (a reset, a cut member, the agent stopping).
func (s *stream) close() {
	s.closeOnce.Do(func() {
		s.a.Close()
		s.b.Close()
	})
}

// run copies both ways until both directions ended. A clean end of one
// direction (EOF) is passed on as a half-close, so a process that shuts
// down writing is seen so on the other node; an error (a reset, a killed
// process) closes both sides, so the other side's process gets its error
// at once rather than waiting for a timeout.
func (s *stream) run() {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.pipe(s.b, s.a) }()
	go func() { defer wg.Done(); s.pipe(s.a, s.b) }()
	wg.Wait()
	s.close()
}

type closeWriter interface{ CloseWrite() error }

// onlyReader and onlyWriter hide ReadFrom/WriteTo, so the copy uses the
// pooled buffer instead of a 32 KiB one of its own.
type onlyReader struct{ io.Reader }
type onlyWriter struct{ io.Writer }

func (s *stream) pipe(dst, src net.Conn) {
	bp := bufs.Get().(*[]byte)
	var err error
	if dst == s.b && s.batch != nil {
		err = s.copyBatched(*bp)
	} else if src == s.b && s.batch != nil {
		err = s.copyGathered(*bp)
	} else {
		_, err = io.CopyBuffer(onlyWriter{dst}, onlyReader{src}, *bp)
	}
	bufs.Put(bp)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.close()
		return
	}
	if cw, ok := dst.(closeWriter); ok && err == nil {
		if cw.CloseWrite() == nil {
			return
		}
	}
	s.close()
}

// copyBatched copies the local side into the TLS stream, each read's
// records written in one batch (batchConn).
func (s *stream) copyBatched(buf []byte) error {
	for {
		n, rerr := s.a.Read(buf)
		if n > 0 {
			s.batch.begin()
			_, werr := s.b.Write(buf[:n])
			if err := s.batch.end(); werr == nil {
				werr = err
			}
			if werr != nil {
				return werr
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// copyGathered copies the TLS stream into the local side: after a read
// that waited, TLS is read on in no-wait mode (batchConn.noWait) while
// whole records are already buffered, so one local write carries up to
// copyBuf bytes rather than one 16 KiB record each.
func (s *stream) copyGathered(buf []byte) error {
	for {
		n, rerr := s.b.Read(buf)
		if rerr == nil {
			s.batch.noWait = true
			for n < len(buf) {
				m, err := s.b.Read(buf[n:])
				n += m
				if err != nil {
					if !errors.Is(err, errWouldBlock) {
						rerr = err
					}
					break
				}
			}
			s.batch.noWait = false
		}
		if n > 0 {
			if _, err := s.a.Write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
