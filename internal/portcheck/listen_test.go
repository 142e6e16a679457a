package portcheck

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// exchange sends raw bytes to port (then half-closes if asked, so the agent
// sees EOF) and returns everything the agent answers before it closes.
func exchange(t *testing.T, port int, send string, halfClose bool) string {
	t.Helper()
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("dial port %d: %v", port, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // far above the agent's own 5 s
	io.WriteString(c, send)
	if halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	got, err := io.ReadAll(c)
	// A reset is how the agent hangs up on a line it did not read to the end.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read port %d: %v", port, err)
	}
	return string(got)
}

// The agent answers an exact challenge with the HMAC for the listener's own
// port and closes; anything else is closed unanswered.
func TestListenAnswers(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 3)
	var logs bytes.Buffer
	l, err := Listen("127.0.0.1", ports, testKey, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	nonce := "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name      string
		send      string
		halfClose bool
		want      string
	}{
		{"exact challenge", challenge(nonce), false, Response(testKey, nonce, ports[1]) + "\n"},
		{"exact challenge, then half-close", challenge(nonce), true, Response(testKey, nonce, ports[1]) + "\n"},
		{"uppercase nonce", challenge(strings.ToUpper(nonce)), false, ""},
		{"short nonce", challenge(nonce[:31]), false, ""},
		{"long nonce", challenge(nonce + "0"), false, ""},
		{"CRLF", strings.TrimSuffix(challenge(nonce), "\n") + "\r\n", false, ""},
		{"extra after newline", challenge(nonce) + "x", false, ""},
		{"no newline then EOF", strings.TrimSuffix(challenge(nonce), "\n"), true, ""},
		{"garbage", "GET / HTTP/1.0\r\n\r\n", false, ""},
		{"lower-case prefix", strings.ToLower(challenge(nonce)), false, ""},
		{"endless line", strings.Repeat("A", 4096), false, ""},
		{"nothing then EOF", "", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exchange(t, ports[1], tt.send, tt.halfClose); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	// Every port answers for itself: an answer is bound to the port it came from.
	for _, p := range ports {
		if got, want := exchange(t, p, challenge(nonce), false), Response(testKey, nonce, p)+"\n"; got != want {
			t.Errorf("port %d: got %q, want %q", p, got, want)
		}
	}
	l.Close()
	assertNoKey(t, logs.String())
}

// Listen copies the key: a caller scrubbing its slice later does not change
// what the agent answers mid-check.
func TestListenCopiesKey(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 1)
	key := bytes.Clone(testKey)
	listenAgent(t, "127.0.0.1", ports, key)
	clear(key)
	nonce := strings.Repeat("0f", 16)
	if got, want := exchange(t, ports[0], challenge(nonce), false), Response(testKey, nonce, ports[0])+"\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A port already taken makes Listen fail naming it, and the ports opened
// before it are released again.
func TestListenBindFailure(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 8)
	taken, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[5])))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	l, err := Listen("127.0.0.1", ports, testKey, nil)
	if err == nil {
		l.Close()
		t.Fatal("Listen = nil error with a taken port")
	}
	if !strings.Contains(err.Error(), "port "+strconv.Itoa(ports[5])) {
		t.Fatalf("error %q does not name port %d", err, ports[5])
	}
	for _, p := range ports[:5] {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d still held after the failed Listen: %v", p, err)
		}
		ln.Close()
	}
}

func TestListenBadArguments(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ports []int
		key   []byte
	}{
		{"empty key", []int{1}, nil},
		{"port 0", []int{0}, testKey},
		{"port 70000", []int{70000}, testKey},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if l, err := Listen("127.0.0.1", tt.ports, tt.key, nil); err == nil {
				l.Close()
				t.Fatal("Listen = nil error")
			}
		})
	}
}

// After Close every port refuses connections, and a connection in progress
// is dropped rather than waited for.
func TestListenClose(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 64)
	l, err := listen("127.0.0.1", ports, testKey, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	held, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	io.WriteString(held, "RAYVAST-") // half a challenge: its handler waits for more
	waitFor(t, func() bool { return l.active() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(30 * time.Second): // the handler's own deadline is an hour
		t.Fatal("Close waited for a connection in progress")
	}
	if n := l.active(); n != 0 {
		t.Fatalf("%d connections still tracked after Close", n)
	}
	held.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := io.ReadAll(held); len(got) != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("held connection: got %q, %v; want closed without answer", got, err)
	}
	for _, p := range ports {
		if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			c.Close()
			t.Fatalf("port %d still accepts after Close", p)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := Check(context.Background(), CheckConfig{}, "127.0.0.1", ports, testKey); err == nil {
		t.Fatal("Check passed against closed listeners")
	}
}

// A flood of idle connections cannot lock the head out of a port: the
// candidate's ports are public, so a stranger holding every slot with idle
// connections would make the head's check fail and the candidate be
// destroyed. When the slots are full the oldest connection is dropped for
// the new one; the handlers stay bounded.
func TestListenFloodBounded(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 1)
	l := listenAgent(t, "127.0.0.1", ports, testKey)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 3 * maxConnsPerPort {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	waitFor(t, func() bool { return l.active() == maxConnsPerPort })
	nonce := strings.Repeat("a1", 16)
	for i := range 5 {
		if got, want := exchange(t, ports[0], challenge(nonce), false), Response(testKey, nonce, ports[0])+"\n"; got != want {
			t.Fatalf("challenge %d behind a flood of idle connections: got %q, want %q", i, got, want)
		}
	}
	waitFor(t, func() bool { return l.active() <= maxConnsPerPort })
	// The oldest idle connections were the ones dropped.
	idle[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Error("the oldest idle connection was kept")
	}
}

// waitFor polls cond; it exists for state in other goroutines, not time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition not reached in 10 s")
}

// active is the number of connections being handled (tests only).
func (l *Listeners) active() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
