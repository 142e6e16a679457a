package mesh

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
)

// copyBuf is the size of each direction's copy buffer: large enough that a
// bulk all_reduce moves in few reads. Borrowed only while bytes are there
// (readLocal, copyGathered), so idle streams cost none of it. 256 KiB was
// tried after the raw-syscall change: agents 1.72 CPU-s/GiB against 2.08
// for 128, but the bare ends' 1.49 against 1.85 in the same two runs (the
// load moved), so not told apart; 128 kept for the many-stream memory.
const copyBuf = 128 << 10

var bufs = sync.Pool{New: func() any { b := make([]byte, copyBuf); return &b }}

// stream is a local connection and its far end, copied both ways.
type stream struct {
	peer      string
	a, b      net.Conn        // a: the local side, b: the TLS stream
	batch     *batchConn      // under b
	araw      syscall.RawConn // a's socket (nil: not one; plain reads and writes)
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
	var err error
	switch {
	case dst == s.b && s.batch != nil:
		err = s.copyBatched()
	case src == s.b && s.batch != nil:
		err = s.copyGathered()
	default:
		bp := bufs.Get().(*[]byte)
		_, err = io.CopyBuffer(onlyWriter{dst}, onlyReader{src}, *bp)
		bufs.Put(bp)
	}
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

// readLocal reads the local side into a buffer from bufs, borrowed once
// bytes are there (readRaw), so a stream waiting on its process holds
// none (issue 41's ≤ 600 KiB a stream; a buffer held per direction was
// 256 of a busy stream's ~410 KiB). bp is nil when nothing came.
func (s *stream) readLocal() (bp *[]byte, n int, err error) {
	return readPooled(s.araw, s.a, &bufs)
}

// writeLocal writes p to the local side.
func (s *stream) writeLocal(p []byte) (int, error) { return writeAll(s.araw, s.a, p) }

// copyBatched copies the local side into the TLS stream, each read's
// records written in one batch (batchConn).
func (s *stream) copyBatched() error {
	for {
		bp, n, rerr := s.readLocal()
		if n > 0 {
			s.batch.begin()
			_, werr := s.b.Write((*bp)[:n])
			if err := s.batch.end(); werr == nil {
				werr = err
			}
			bufs.Put(bp)
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

// copyGathered copies the TLS stream into the local side. TLS is read in
// no-wait mode (batchConn.noWait) while whole records are already there,
// so one local write carries up to copyBuf bytes rather than one 16 KiB
// record each; only when none is there does it wait for the socket
// (batchConn.await), holding no buffer of its own meanwhile.
func (s *stream) copyGathered() error {
	for {
		bp := bufs.Get().(*[]byte)
		buf := *bp
		n := 0
		var rerr error
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
		var werr error
		if n > 0 {
			_, werr = s.writeLocal(buf[:n])
		}
		bufs.Put(bp)
		if werr != nil {
			return werr
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
		if n == 0 {
			s.batch.await()
		}
	}
}
