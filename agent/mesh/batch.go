package mesh

import (
	"net"
	"sync"
	"syscall"
)

// batchConn is the TCP connection under a mesh stream's TLS. TLS writes
// one record (at most 16 KiB) per write call; within a batch (one copy
// step of up to copyBuf bytes) the records are gathered and written in one
// call, which costs the agent far fewer system calls per GiB. Writes
// outside a batch (the handshake, alerts) go straight through. Reads
// come through a pooled buffer (readbuf.go).
type batchConn struct {
	net.Conn
	raw syscall.RawConn // the socket's, to wait for bytes holding no buffer; nil: plain reads

	// The read side, the stream's reading goroutine's alone.
	rb      *[]byte // bytes read and not yet taken by TLS: (*rb)[r:w]; nil when none
	r, w    int
	noWait  bool
	pending error // what ended await's wait, for TLS's next Read

	mu   sync.Mutex
	on   bool
	buf  []byte  // the open batch's records (in *bp)
	bp   *[]byte // from batchBufs while a batch is open
	werr error
}

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		b.raw, _ = sc.SyscallConn()
	}
	return b
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on {
		return b.Conn.Write(p)
	}
	if b.werr != nil {
		return 0, b.werr
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= copyBuf {
		b.flushLocked()
	}
	return len(p), b.werr
}

// batchBufs are the batches' buffers, held only while a batch is open: a
// stream that is not sending at the moment (most of gloo's and NCCL's
// many sockets, most of the time) holds none (issue 41: ≤ 600 KiB per
// stream; a buffer kept per stream was 288 KiB of each stream's ~730).
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, copyBuf+(32<<10)); return &b }}

// begin starts a batch; end writes what it gathered and ends it.
func (b *batchConn) begin() {
	b.mu.Lock()
	b.on = true
	b.bp = batchBufs.Get().(*[]byte)
	b.buf = (*b.bp)[:0]
	b.mu.Unlock()
}

func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	b.on = false
	*b.bp = b.buf[:0] // append may have grown it
	batchBufs.Put(b.bp)
	b.bp, b.buf = nil, nil
	return b.werr
}

func (b *batchConn) flushLocked() {
	if len(b.buf) > 0 && b.werr == nil {
		_, b.werr = writeAll(b.raw, b.Conn, b.buf)
	}
	b.buf = b.buf[:0]
}
