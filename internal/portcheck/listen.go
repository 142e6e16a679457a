package portcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
)

const (
	// connDeadline bounds one connection: the head sends its challenge at
	// once, so anything slower is not the head.
	connDeadline = 5 * time.Second
	// maxChallengeRead is how much of a connection the agent reads at most.
	maxChallengeRead = 100
	// maxConnsPerPort caps connections per listener so a flood costs at
	// most 64*8 sockets (the head uses one per port). A new connection
	// beyond it drops the oldest: the ports are public, and refusing new
	// ones would let a stranger holding idle connections fail the head's
	// check (and so have the candidate destroyed).
	maxConnsPerPort = 8
)

// Listeners answers the head's port check on each of the agent's ports.
type Listeners struct {
	key      secret.Bytes
	deadline time.Duration // per connection
	log      *slog.Logger
	lns      []net.Listener
	wg       sync.WaitGroup
	once     sync.Once

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// Listen opens one TCP listener per port on host ("" = all addresses) and
// answers challenges until Close. If any port cannot be bound, the ones
// already open are closed and the error names the port.
func Listen(host string, ports []int, portKey []byte, log *slog.Logger) (*Listeners, error) {
	return listen(host, ports, portKey, log, connDeadline)
}

// listen is Listen with the per-connection deadline as a parameter, so a
// test can prove Close does not wait for it.
func listen(host string, ports []int, portKey []byte, log *slog.Logger, deadline time.Duration) (*Listeners, error) {
	if len(portKey) == 0 {
		return nil, errors.New("portcheck listen: empty port key")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Listeners{
		key:      secret.NewBytes(bytes.Clone(portKey)),
		deadline: deadline,
		log:      log,
		conns:    make(map[net.Conn]struct{}),
	}
	for _, p := range ports {
		if p < 1 || p > 65535 {
			l.closeListeners()
			return nil, fmt.Errorf("portcheck listen port %d: out of range", p)
		}
		ln, err := listenConfig.Listen(context.Background(), "tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			l.closeListeners()
			return nil, fmt.Errorf("portcheck listen port %d: %w", p, err)
		}
		l.lns = append(l.lns, ln)
	}
	for i, ln := range l.lns {
		l.wg.Go(func() { l.serve(ln, ports[i]) })
	}
	return l, nil
}

// Close stops every listener, drops connections in progress and waits for
// all handlers to return. It is safe to call more than once.
func (l *Listeners) Close() error {
	var err error
	l.once.Do(func() {
		err = l.closeListeners()
		l.mu.Lock()
		l.closed = true
		for c := range l.conns {
			c.Close()
		}
		l.mu.Unlock()
	})
	l.wg.Wait()
	return err
}

func (l *Listeners) closeListeners() error {
	var errs []error
	for _, ln := range l.lns {
		if err := ln.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// serve accepts on one port until its listener is closed.
func (l *Listeners) serve(ln net.Listener, port int) {
	var mine []net.Conn // this port's connections, oldest first; guarded by l.mu
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait instead of spinning.
			l.log.Warn("portcheck accept", "port", port, "err", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if !l.track(c, &mine) {
			c.Close()
			return
		}
		l.wg.Go(func() {
			defer func() { c.Close(); l.untrack(c, &mine) }()
			l.answer(c, port)
		})
	}
}

// track records c so Close can drop it, first closing the port's oldest
// connections while the port is full; false once Close has begun. A dropped
// connection's handler sees its read fail and ends.
func (l *Listeners) track(c net.Conn, mine *[]net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	for len(*mine) >= maxConnsPerPort {
		(*mine)[0].Close()
		*mine = slices.Delete(*mine, 0, 1)
	}
	*mine = append(*mine, c)
	l.conns[c] = struct{}{}
	return true
}

func (l *Listeners) untrack(c net.Conn, mine *[]net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(*mine, c); i >= 0 {
		*mine = slices.Delete(*mine, i, i+1)
	}
	delete(l.conns, c)
}

// answer reads one challenge from c and writes the HMAC for this listener's
// own port. Anything but an exact challenge is closed unanswered.
func (l *Listeners) answer(c net.Conn, port int) {
	if err := c.SetDeadline(time.Now().Add(l.deadline)); err != nil {
		return
	}
	line, err := readLine(c, maxChallengeRead)
	if err != nil {
		l.log.Debug("portcheck bad challenge", "port", port, "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	nonce, ok := parseChallenge(line)
	if !ok {
		l.log.Debug("portcheck bad challenge", "port", port, "remote", c.RemoteAddr().String())
		return
	}
	if _, err := io.WriteString(c, Response(l.key.Reveal(), nonce, port)+"\n"); err != nil {
		l.log.Debug("portcheck reply", "port", port, "err", err)
		return
	}
	// Wait for the head to close first (within the same deadline), so the
	// connection's TIME_WAIT is the head's and not on this port: Ray binds
	// its worker ports without SO_REUSEADDR right after enrollment.
	_, _ = io.Copy(io.Discard, io.LimitReader(c, maxChallengeRead))
}

// readLine reads from r up to and including the first newline, at most max
// bytes. Bytes after the newline in the same read are kept, so the caller's
// exact-match parse refuses them.
func readLine(r io.Reader, max int) ([]byte, error) {
	buf := make([]byte, max)
	n := 0
	for n < max {
		m, err := r.Read(buf[n:])
		n += m
		if bytes.IndexByte(buf[:n], '\n') >= 0 {
			return buf[:n], nil
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, errors.New("line too long")
}
