package portcheck

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Defaults for the zero values of CheckConfig. 9 s total keeps the whole
// check inside docs/protocol.md §6's 10 s.
const (
	DefaultConcurrency  = 16
	DefaultDialTimeout  = 2 * time.Second
	DefaultReplyTimeout = 2 * time.Second
	DefaultTotal        = 9 * time.Second
)

// CheckConfig tunes Check. Zero values mean the defaults above, crypto/rand
// and a net.Dialer without TCP keep-alive.
type CheckConfig struct {
	Concurrency  int           // connections in flight at once
	DialTimeout  time.Duration // per connection attempt
	ReplyTimeout time.Duration // from connected to the agent's reply and close
	Total        time.Duration // the whole check, enforced with a context deadline
	Rand         io.Reader     // nonces; inject for deterministic tests
	// Dial must honour ctx: Check waits for every dial it started.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (c CheckConfig) withDefaults() CheckConfig {
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.ReplyTimeout <= 0 {
		c.ReplyTimeout = DefaultReplyTimeout
	}
	if c.Total <= 0 {
		c.Total = DefaultTotal
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	if c.Dial == nil {
		// A check's connection lives for one exchange: keep-alive would be
		// four setsockopt calls per port for probes never sent, and in an
		// enrollment storm syscalls are most of the head's CPU.
		c.Dial = (&net.Dialer{KeepAlive: -1}).DialContext
	}
	return c
}

// Failure kinds of an *Error.
const (
	KindDial      = "dial failed"            // refused, unreachable, dial timeout
	KindWrite     = "write failed"           // the challenge could not be sent
	KindTimeout   = "timeout"                // no complete reply and close in time
	KindNoReply   = "closed without reply"   // accepted, said nothing (a bare proxy)
	KindRead      = "read failed"            // reset or other read error
	KindMalformed = "malformed reply"        // not 64 lowercase hex chars and a newline
	KindExtra     = "extra data after reply" // more than the one line
	KindWrongMAC  = "wrong hmac"             // wrong key, or replayed for another port or nonce
)

// Error is a failed port. It names the port and the kind of failure, never
// the key or the expected answer.
type Error struct {
	Port int
	Kind string
	Err  error // the network error behind Kind, if any
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("portcheck port %d: %s: %v", e.Port, e.Kind, e.Err)
	}
	return fmt.Sprintf("portcheck port %d: %s", e.Port, e.Kind)
}

func (e *Error) Unwrap() error { return e.Err }

// Check dials every port at ip and returns nil only if each one answered its
// challenge with the right HMAC and closed. It stops at the first failure and
// returns it as an *Error; the whole check ends within cfg.Total.
func Check(ctx context.Context, cfg CheckConfig, ip string, ports []int, portKey []byte) error {
	cfg = cfg.withDefaults()
	if _, err := netip.ParseAddr(ip); err != nil {
		return fmt.Errorf("portcheck ip %q: not an IP address", ip)
	}
	if len(ports) == 0 {
		return errors.New("portcheck: no ports")
	}
	for _, p := range ports {
		if p < 1 || p > 65535 {
			return fmt.Errorf("portcheck port %d: out of range", p)
		}
	}
	if len(portKey) == 0 {
		return errors.New("portcheck: empty port key")
	}
	// Nonces are drawn up front in port order so an injected Rand gives each
	// port the same nonce on every run, whatever the scheduling.
	nonces := make([]string, len(ports))
	buf := make([]byte, nonceBytes)
	for i := range ports {
		if _, err := io.ReadFull(cfg.Rand, buf); err != nil {
			return fmt.Errorf("portcheck nonce: %w", err)
		}
		nonces[i] = hex.EncodeToString(buf)
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.Total)
	defer cancel()
	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		once.Do(func() { first = err; cancel() })
	}
	next := make(chan int)
	workers := min(cfg.Concurrency, len(ports))
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := checkPort(ctx, cfg, ip, ports[i], nonces[i], portKey); err != nil {
					fail(err)
				}
			}
		})
	}
feed:
	for i := range ports {
		select {
		case next <- i:
		case <-ctx.Done():
			// Total elapsed (or the caller gave up) before this port was
			// even dialled: it is the one that failed, unless one already did.
			fail(&Error{Port: ports[i], Kind: KindTimeout, Err: context.Cause(ctx)})
			break feed
		}
	}
	close(next)
	wg.Wait()
	return first
}

// checkPort runs one port's challenge and judges the reply.
func checkPort(ctx context.Context, cfg CheckConfig, ip string, port int, nonce string, portKey []byte) error {
	if ctx.Err() != nil {
		return &Error{Port: port, Kind: KindTimeout, Err: ctx.Err()}
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	dctx, dcancel := context.WithTimeout(ctx, cfg.DialTimeout)
	conn, err := cfg.Dial(dctx, "tcp", addr)
	dcancel()
	if err != nil {
		if ctx.Err() != nil { // Total passed or the check was cancelled
			return &Error{Port: port, Kind: KindTimeout, Err: context.Cause(ctx)}
		}
		return &Error{Port: port, Kind: KindDial, Err: err}
	}
	defer conn.Close()
	// Cancelling ctx (another port failed, or Total passed) must unblock
	// this connection at once, not after its own deadline.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	deadline := time.Now().Add(cfg.ReplyTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return &Error{Port: port, Kind: KindWrite, Err: err}
	}
	if _, err := io.WriteString(conn, challenge(nonce)); err != nil {
		if peerGone(err) {
			return &Error{Port: port, Kind: KindNoReply, Err: err}
		}
		return classify(ctx, port, KindWrite, err)
	}
	reply, err := readReply(conn)
	switch {
	case len(reply) > replyLen:
		return &Error{Port: port, Kind: KindExtra}
	case len(reply) == 0 && (err == nil || peerGone(err)):
		// A port that accepts and hangs up (Docker's proxy with nothing
		// behind it) ends with EOF or, if our challenge crossed its close,
		// a reset: the same failure either way.
		return &Error{Port: port, Kind: KindNoReply, Err: err}
	case err != nil:
		return classify(ctx, port, KindRead, err)
	case len(reply) != replyLen || reply[replyLen-1] != '\n' || !isLowerHex(reply[:replyLen-1]):
		return &Error{Port: port, Kind: KindMalformed}
	}
	// LimitReader stopped at replyLen+1 bytes or at EOF; a full reply here
	// means EOF came right after it.
	want := Response(portKey, nonce, port)
	if !hmac.Equal(reply[:replyLen-1], []byte(want)) {
		return &Error{Port: port, Kind: KindWrongMAC}
	}
	return nil
}

// readReply reads the agent's one line: up to its newline, one byte past
// a whole reply at most (so a peer sending megabytes costs nothing), or to
// EOF. It does not wait for the agent to close: the head closes first (the
// deferred Close), so the TCP TIME_WAIT of each connection stays on the
// head's ephemeral port. Were the agent to close first, each of its 64 ports
// would sit in TIME_WAIT for a minute after enrollment, and Ray's raylet,
// which checks a worker port by binding it without SO_REUSEADDR, would find
// every port taken (its first workers die: "No available ports").
func readReply(conn net.Conn) ([]byte, error) {
	buf := make([]byte, replyLen+1)
	n := 0
	var err error
	for n < len(buf) && bytes.IndexByte(buf[:n], '\n') < 0 {
		var m int
		m, err = conn.Read(buf[n:])
		n += m
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return buf[:n], err
}

// peerGone reports whether err means the peer closed or reset the connection.
func peerGone(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// classify names a network error: deadlines and our own cancellation are
// timeouts, anything else keeps the given kind.
func classify(ctx context.Context, port int, kind string, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return &Error{Port: port, Kind: KindTimeout, Err: err}
	}
	return &Error{Port: port, Kind: kind, Err: err}
}
