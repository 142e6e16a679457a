package mesh

import (
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// The stream copies' reads and writes are made as raw system calls on the
// sockets, which Go keeps non-blocking (EAGAIN: wait for the poller), so
// they cannot block. Why raw: Go's ordinary syscall path wakes the
// runtime's monitor thread (sysmon) at the start of every busy period and
// keeps it ticking every 20 µs while calls run long, which in the
// AllReduce benchmark was ~19k wakeups and ~15% of an agent's CPU
// (per-thread /proc times; perf: runtime.sysmon 12%). A raw call keeps the
// P for its few tens of µs, which is all a copy step holds it anyway.

func sysRead(fd int, p []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e != syscall.EINTR {
			return int(n), e
		}
	}
}

func sysWrite(fd int, p []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e != syscall.EINTR {
			return int(n), e
		}
	}
}

// readRaw waits for rc to be readable holding no buffer (Go's Read would
// need the buffer while it waits), then reads into one from pool. bp is
// nil when nothing came.
func readRaw(rc syscall.RawConn, pool *sync.Pool) (bp *[]byte, n int, err error) {
	var serr syscall.Errno
	err = rc.Read(func(fd uintptr) bool {
		bp = pool.Get().(*[]byte)
		n, serr = sysRead(int(fd), *bp)
		if serr == syscall.EAGAIN {
			pool.Put(bp)
			bp = nil
			return false // wait for the poller
		}
		return true
	})
	switch {
	case err != nil: // closed, a deadline
	case serr != 0:
		err = os.NewSyscallError("read", serr)
	case n == 0:
		err = io.EOF
	}
	if n <= 0 {
		n = 0
		if bp != nil {
			pool.Put(bp)
			bp = nil
		}
	}
	return bp, n, err
}

// writeRaw writes all of p to rc, waiting for the poller when the socket's
// buffer is full.
func writeRaw(rc syscall.RawConn, p []byte) (int, error) {
	done := 0
	var serr syscall.Errno
	err := rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			n, e := sysWrite(int(fd), p[done:])
			if e == syscall.EAGAIN {
				return false
			}
			if e != 0 {
				serr = e
				return true
			}
			done += n
		}
		return true
	})
	if err == nil && serr != 0 {
		err = os.NewSyscallError("write", serr)
	}
	return done, err
}

// readPooled reads c once into a buffer from pool: on its raw socket rc
// when there is one (readRaw: the buffer borrowed only once bytes are
// there), else by c's own Read. bp is nil when nothing came.
func readPooled(rc syscall.RawConn, c io.Reader, pool *sync.Pool) (bp *[]byte, n int, err error) {
	if rc != nil {
		return readRaw(rc, pool)
	}
	bp = pool.Get().(*[]byte)
	if n, err = c.Read(*bp); n <= 0 {
		n = 0
		pool.Put(bp)
		bp = nil
	}
	return bp, n, err
}

// writeAll writes p to c, on its raw socket rc when there is one.
func writeAll(rc syscall.RawConn, c io.Writer, p []byte) (int, error) {
	if rc != nil {
		return writeRaw(rc, p)
	}
	return c.Write(p)
}
