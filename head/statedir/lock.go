package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile holds the PID of the head serving the dir; the flock on it, not
// its content, is the lock (the kernel drops it when the process dies).
const LockFile = "head.lock"

// ErrLocked is returned by Lock when another head serves the dir.
var ErrLocked = errors.New("state dir in use")

// DirLock is a held lock on a state dir.
type DirLock struct{ f *os.File }

// Lock takes the state dir for one head (docs/protocol.md §8: one head per state dir).
// It fails at once, naming the holder's PID, when another process holds it.
func Lock(dir string) (*DirLock, error) {
	p := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock state dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(p)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(pid); perr != nil {
				pid = "unknown"
			}
			return nil, fmt.Errorf("lock state dir %s: %w by head pid %s (head status and head down work beside it; stop it before starting another)", dir, ErrLocked, pid)
		}
		return nil, fmt.Errorf("lock state dir %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{f: f}, nil
}

// Unlock releases the lock; the file stays (removing it would race a head
// that just opened it).
func (l *DirLock) Unlock() error { return l.f.Close() }

// CleanTemp removes temp files a killed writer left in the dir (atomic
// writes name them ".NAME.tmp…"). Call it holding the lock.
func CleanTemp(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("clean state dir: %w", err)
	}
	var removed []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, ".") && strings.Contains(n, ".tmp") {
			if err := os.Remove(filepath.Join(dir, n)); err == nil {
				removed = append(removed, n)
			}
		}
	}
	return removed, nil
}
