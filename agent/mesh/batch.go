package mesh

import (
	"net"
	"sync"
)

// batchConn is the TCP connection under a mesh stream's TLS. TLS writes
// one record (at most 16 KiB) per write call; within a batch (one copy
// step of up to copyBuf bytes) the records are gathered and written in one
// call, which costs the agent far fewer system calls per GiB. Writes
// outside a batch (the handshake, alerts) go straight through.
type batchConn struct {
	net.Conn
	mu   sync.Mutex
	on   bool
	buf  []byte
	werr error
}

func newBatchConn(c net.Conn) *batchConn {
	return &batchConn{Conn: c}
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

// begin starts a batch; end writes what it gathered and ends it.
func (b *batchConn) begin() {
	b.mu.Lock()
	b.on = true
	if b.buf == nil {
		b.buf = make([]byte, 0, copyBuf+(32<<10))
	}
	b.mu.Unlock()
}

func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	b.on = false
	return b.werr
}

func (b *batchConn) flushLocked() {
	if len(b.buf) > 0 && b.werr == nil {
		_, b.werr = b.Conn.Write(b.buf)
	}
	b.buf = b.buf[:0]
}
