package portcheck

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// A real agent on 64 loopback ports passes, on 127.0.0.1, another loopback
// address, ::1 (net.JoinHostPort brackets it), and listening on all
// addresses (host "") checked through 127.0.0.1.
func TestCheckAllPortsAnswer(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "127.0.0.2", "::1", ""} {
		t.Run("listen on "+strconv.Quote(host), func(t *testing.T) {
			ip := host
			if ip == "" {
				ip = "127.0.0.1"
			}
			if host == "::1" {
				ln, err := net.Listen("tcp", "[::1]:0")
				if err != nil {
					t.Skipf("SKIP: no IPv6 loopback here (%v)", err)
				}
				ln.Close()
			}
			ports := rvtest.FreePorts(t, host, 64)
			listenAgent(t, host, ports, testKey)
			if err := Check(context.Background(), CheckConfig{}, ip, ports, testKey); err != nil {
				t.Fatalf("Check = %v, want nil", err)
			}
		})
	}
}

// Each way a port can be wrong fails the check with an *Error naming that
// port and the kind, while the other 63 ports are served by the real agent.
func TestCheckFailureKinds(t *testing.T) {
	const reply = 300 * time.Millisecond
	otherKey := []byte("some-other-key-0123456789abcdefg")
	answer := func(body func(nonce string, port int) string) func(net.Conn, int) {
		return func(c net.Conn, port int) {
			nonce, ok := readChallenge(c)
			if !ok {
				return
			}
			io.WriteString(c, body(nonce, port))
		}
	}
	tests := []struct {
		name   string
		handle func(c net.Conn, port int) // nil: nothing listens on the port
		want   string
	}{
		{"closed port", nil, KindDial},
		{"silent, holds the connection", func(c net.Conn, _ int) { io.Copy(io.Discard, c) }, KindTimeout},
		{"accepts and closes (bare proxy)", func(net.Conn, int) {}, KindNoReply},
		{"reads and closes", func(c net.Conn, _ int) { readChallenge(c) }, KindNoReply},
		{"wrong key", answer(func(n string, p int) string { return Response(otherKey, n, p) + "\n" }), KindWrongMAC},
		{"answer for another port", answer(func(n string, p int) string { return Response(testKey, n, p+1) + "\n" }), KindWrongMAC},
		{"replayed answer for another nonce", answer(func(_ string, p int) string {
			return Response(testKey, strings.Repeat("ab", 16), p) + "\n"
		}), KindWrongMAC},
		{"uppercase hex", answer(func(n string, p int) string { return strings.ToUpper(Response(testKey, n, p)) + "\n" }), KindMalformed},
		{"missing newline", answer(func(n string, p int) string { return Response(testKey, n, p) }), KindMalformed},
		{"CRLF", answer(func(n string, p int) string { return Response(testKey, n, p) + "\r\n" }), KindExtra},
		{"short", answer(func(n string, p int) string { return Response(testKey, n, p)[:10] + "\n" }), KindMalformed},
		{"garbage", answer(func(string, int) string { return "HTTP/1.1 400 Bad Request\r\n\r\n" }), KindMalformed},
		{"extra data", answer(func(n string, p int) string { return Response(testKey, n, p) + "\nmore" }), KindExtra},
		{"megabytes", func(c net.Conn, _ int) {
			junk := bytes.Repeat([]byte("x"), 1<<20)
			for range 16 {
				if _, err := c.Write(junk); err != nil {
					return
				}
			}
		}, KindExtra},
		{"right answer too late", func(c net.Conn, port int) {
			nonce, _ := readChallenge(c)
			time.Sleep(3 * reply) // the head's deadline was set before it sent the challenge
			io.WriteString(c, Response(testKey, nonce, port)+"\n")
		}, KindTimeout},
		{"right answer dripped past the deadline", func(c net.Conn, port int) {
			nonce, _ := readChallenge(c)
			for _, b := range []byte(Response(testKey, nonce, port) + "\n") {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(reply / 8) // every read makes progress; only an absolute deadline stops this
			}
		}, KindTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ports := rvtest.FreePorts(t, "127.0.0.1", 64)
			bad := 37
			listenAgent(t, "127.0.0.1", without(ports, bad), testKey)
			if tt.handle != nil {
				fakePort(t, "127.0.0.1", ports[bad], tt.handle)
			}
			cfg := CheckConfig{ReplyTimeout: reply, Total: 5 * time.Second}
			err := Check(context.Background(), cfg, "127.0.0.1", ports, testKey)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Check = %v, want *Error", err)
			}
			if pe.Port != ports[bad] || pe.Kind != tt.want {
				t.Fatalf("got port %d kind %q (%v), want port %d kind %q", pe.Port, pe.Kind, err, ports[bad], tt.want)
			}
			if !strings.Contains(err.Error(), "port "+strconv.Itoa(ports[bad])) {
				t.Errorf("error %q does not name port %d", err, ports[bad])
			}
			assertNoKey(t, err.Error())
		})
	}
}

func assertNoKey(t *testing.T, s string) {
	t.Helper()
	for _, k := range []string{string(testKey), hex.EncodeToString(testKey), base64.StdEncoding.EncodeToString(testKey)} {
		if strings.Contains(s, k) {
			t.Errorf("output leaks the port key: %q", s)
		}
	}
}

// If every port accepts and says nothing, or every dial hangs, Check still
// returns by Total even with huge per-connection timeouts.
func TestCheckBoundedByTotal(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 64)
	for _, p := range ports {
		fakePort(t, "127.0.0.1", p, func(c net.Conn, _ int) { io.Copy(io.Discard, c) })
	}
	blackHole := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	tests := []struct {
		name string
		dial func(context.Context, string, string) (net.Conn, error)
	}{
		{"all ports silent", nil},
		{"all dials black holes", blackHole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := CheckConfig{DialTimeout: time.Hour, ReplyTimeout: time.Hour, Total: 200 * time.Millisecond, Dial: tt.dial}
			done := make(chan error, 1)
			go func() { done <- Check(context.Background(), cfg, "127.0.0.1", ports, testKey) }()
			select {
			case err := <-done:
				var pe *Error
				if !errors.As(err, &pe) || pe.Kind != KindTimeout {
					t.Fatalf("Check = %v, want a %q *Error", err, KindTimeout)
				}
			case <-time.After(30 * time.Second): // generous: the point is that it returns at all
				t.Fatal("Check did not return: Total is not enforced")
			}
		})
	}
}

// Calling with a cancelled context fails at once, naming a port.
func TestCheckCancelledContext(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 64)
	listenAgent(t, "127.0.0.1", ports, testKey)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Check(ctx, CheckConfig{}, "127.0.0.1", ports, testKey)
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindTimeout {
		t.Fatalf("Check = %v, want a %q *Error", err, KindTimeout)
	}
}

// At most Concurrency connections are open at once. Each test port counts
// its connection as done before it answers, so the head cannot open the
// next one before the count dropped: the maximum is exact, not sampled.
func TestCheckConcurrencyBound(t *testing.T) {
	const bound = 4
	ports := rvtest.FreePorts(t, "127.0.0.1", 64)
	var mu sync.Mutex
	cur, peak := 0, 0
	for _, p := range ports {
		fakePort(t, "127.0.0.1", p, func(c net.Conn, port int) {
			mu.Lock()
			cur++
			peak = max(peak, cur)
			mu.Unlock()
			nonce, _ := readChallenge(c)
			time.Sleep(2 * time.Millisecond) // let the other workers catch up
			mu.Lock()
			cur--
			mu.Unlock()
			io.WriteString(c, Response(testKey, nonce, port)+"\n")
		})
	}
	if err := Check(context.Background(), CheckConfig{Concurrency: bound}, "127.0.0.1", ports, testKey); err != nil {
		t.Fatalf("Check = %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("peak concurrent connections: %d", peak)
	if peak > bound {
		t.Fatalf("peak concurrent connections %d, want <= %d", peak, bound)
	}
}

// seededRand is a deterministic stream of bytes: the same seed, the same nonces.
func seededRand() io.Reader { return rand.NewChaCha8([32]byte{7}) }

// With an injected Rand the i-th port gets the i-th 16 bytes as its nonce,
// whatever order the connections happen in; every port's nonce differs.
func TestCheckNoncesFromRand(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 64)
	var mu sync.Mutex
	got := map[int]string{}
	for _, p := range ports {
		fakePort(t, "127.0.0.1", p, func(c net.Conn, port int) {
			nonce, ok := readChallenge(c)
			if !ok {
				return
			}
			mu.Lock()
			got[port] = nonce
			mu.Unlock()
			io.WriteString(c, Response(testKey, nonce, port)+"\n")
		})
	}
	for run := range 2 {
		if err := Check(context.Background(), CheckConfig{Rand: seededRand()}, "127.0.0.1", ports, testKey); err != nil {
			t.Fatalf("run %d: Check = %v, want nil", run, err)
		}
		r := seededRand()
		seen := map[string]bool{}
		for _, p := range ports {
			b := make([]byte, nonceBytes)
			r.Read(b)
			want := hex.EncodeToString(b)
			mu.Lock()
			g := got[p]
			mu.Unlock()
			if g != want {
				t.Fatalf("run %d port %d: nonce %q, want %q", run, p, g, want)
			}
			if seen[g] {
				t.Fatalf("nonce %q used twice", g)
			}
			seen[g] = true
		}
	}
}

// A Rand that fails fails the check before any dial.
func TestCheckRandFailure(t *testing.T) {
	err := Check(context.Background(), CheckConfig{Rand: bytes.NewReader(make([]byte, 20))}, "127.0.0.1", []int{1, 2}, testKey)
	if err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Fatalf("Check = %v, want a nonce error", err)
	}
}

// Bad arguments are refused before any network traffic.
func TestCheckBadArguments(t *testing.T) {
	tests := []struct {
		name  string
		ip    string
		ports []int
		key   []byte
	}{
		{"hostname, not an IP", "localhost", []int{1}, testKey},
		{"empty IP", "", []int{1}, testKey},
		{"no ports", "127.0.0.1", nil, testKey},
		{"port 0", "127.0.0.1", []int{0}, testKey},
		{"port 65536", "127.0.0.1", []int{65536}, testKey},
		{"empty key", "127.0.0.1", []int{1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dial := func(context.Context, string, string) (net.Conn, error) {
				t.Error("dialled despite bad arguments")
				return nil, errors.New("no")
			}
			if err := Check(context.Background(), CheckConfig{Dial: dial}, tt.ip, tt.ports, tt.key); err == nil {
				t.Fatal("Check = nil, want an error")
			}
		})
	}
}

func TestResponseKnownAnswer(t *testing.T) {
	// HMAC-SHA256("key", "00112233445566778899aabbccddeeff:40000"), computed
	// independently with: printf '%s' '00112233445566778899aabbccddeeff:40000' | openssl dgst -sha256 -hmac key
	got := Response([]byte("key"), "00112233445566778899aabbccddeeff", 40000)
	want := "2812651ce73492e4d64a45cb934ca1fe235bd520114a1e8b4bc6ed68d52aeb0d"
	if got != want {
		t.Fatalf("Response = %s, want %s", got, want)
	}
}

// The first failure cancels the rest: connections in flight to silent ports
// are dropped at once, not left to their own (here endless) timeouts.
func TestCheckStopsAtFirstFailure(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 64)
	var mu sync.Mutex
	accepted := 0
	for _, p := range ports[1:] {
		fakePort(t, "127.0.0.1", p, func(c net.Conn, _ int) {
			mu.Lock()
			accepted++
			mu.Unlock()
			io.Copy(io.Discard, c)
		})
	}
	// ports[0] has nothing listening, but is dialled only once the first
	// silent connections are in flight: a dial hook holds it back.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])) {
			waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return accepted >= 3 })
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	cfg := CheckConfig{Concurrency: 4, DialTimeout: time.Hour, ReplyTimeout: time.Hour, Total: time.Hour, Dial: dial}
	done := make(chan error, 1)
	go func() { done <- Check(context.Background(), cfg, "127.0.0.1", ports, testKey) }()
	select {
	case err := <-done:
		var pe *Error
		if !errors.As(err, &pe) || pe.Port != ports[0] || pe.Kind != KindDial {
			t.Fatalf("Check = %v, want a %q *Error for port %d", err, KindDial, ports[0])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Check kept waiting on the other ports after a failure")
	}
}
