package mesh

import (
	"errors"
	"sync"
)

// readBuf is the size of the TCP side's read buffer under TLS. TLS asks
// its conn for about one record (16 KiB) at a time, so reading the socket
// straight costs a read syscall per record; one read of up to 256 KiB
// takes what the kernel has in one go and TLS's asks are served from it.
const readBuf = 256 << 10

// readBufs are those buffers, each held by a stream only while bytes it
// read are waiting for TLS: a stream blocked reading holds none (idle
// streams are most of gloo's and NCCL's; issue 41: ≤ 600 KiB a stream).
var readBufs = sync.Pool{New: func() any { b := make([]byte, readBuf); return &b }}

// errWouldBlock is Read's answer in no-wait mode when nothing is buffered.
// It is a timeout, which crypto/tls treats as temporary (as a deadline):
// the record read so far stays in TLS's input and the next Read goes on.
var errWouldBlock = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "mesh: no bytes buffered" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

// Read serves TLS from the read buffer, filling it from the socket when
// empty; in no-wait mode (noWait) it never waits for the socket. Only the
// goroutine reading the stream calls it (TLS's reads are under its lock).
func (b *batchConn) Read(p []byte) (int, error) {
	if b.rb == nil {
		if err := b.pending; err != nil {
			b.pending = nil
			return 0, err
		}
		if b.noWait {
			return 0, errWouldBlock
		}
		if err := b.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*b.rb)[b.r:b.w])
	b.r += n
	if b.r == b.w {
		readBufs.Put(b.rb)
		b.rb = nil
	}
	return n, nil
}

// fill waits for the socket to be readable and only then borrows a buffer
// and reads into it.
func (b *batchConn) fill() error {
	return b.took(readPooled(b.raw, b.Conn, &readBufs))
}

// await waits until TLS has socket bytes to read (the stream's copy found
// none buffered); what ends the wait is kept for TLS's next Read.
func (b *batchConn) await() {
	if b.rb == nil && b.pending == nil {
		b.pending = b.fill()
	}
}

// took keeps what a read brought (readPooled: bp is nil when nothing came).
func (b *batchConn) took(bp *[]byte, n int, err error) error {
	if n == 0 {
		if err == nil {
			err = errors.New("mesh: empty read")
		}
		return err
	}
	b.rb, b.r, b.w = bp, 0, n
	return nil // an error with bytes comes again on the next read
}
