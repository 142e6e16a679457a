package guestapi

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
)

// The head's address in these tests; strangers and callers use others of
// 127/8 (Linux routes all of it to loopback).
const headIP = "127.0.0.4"

// dialFrom opens a TCP connection to the server from source address ip.
func dialFrom(t *testing.T, r *running, ip string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", r.addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	return c
}

// request sends one HTTPS request on c (TLS on top) and returns the
// response; the connection stays open for reuse by the caller.
func request(t *testing.T, r *running, tc *tls.Conn, br **bufio.Reader, path, token string) (*http.Response, error) {
	t.Helper()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: node\r\n", path)
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(tc, req+"\r\n"); err != nil {
		return nil, err
	}
	if *br == nil {
		*br = bufio.NewReader(tc)
	}
	resp, err := http.ReadResponse(*br, nil)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// getFrom makes one request from ip on a fresh connection.
func getFrom(t *testing.T, r *running, ip, path, token string) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	tc := tls.Client(dialFrom(t, r, ip), r.tlsConfig())
	defer tc.Close()
	var br *bufio.Reader
	resp, err := request(t, r, tc, &br, path, token)
	if err != nil {
		t.Fatalf("GET %s from %s: %v", path, ip, err)
	}
	return resp.StatusCode, time.Since(start)
}

// hold opens n idle connections from ip (nothing sent) and returns them.
func hold(t *testing.T, r *running, ip string, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for range n {
		cs = append(cs, dialFrom(t, r, ip))
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

// stillOpen counts the connections the server has not closed.
func stillOpen(cs []net.Conn) int {
	n := 0
	for _, c := range cs {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		if errors.Is(err, os.ErrDeadlineExceeded) {
			n++
		}
	}
	return n
}

func healthToken(t *testing.T) string {
	t.Helper()
	tok, err := guestauth.MintHealthToken(testApp, testRoot, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestOneAddressCannotStarve: one address holding many idle connections
// keeps only PerIPConns of them, and a second address and the head's poll
// are served at once. The strangers' header timeout is set to a minute, so
// being served at all (the client gives up after 10 s) proves nobody waited
// for the strangers' connections to time out.
func TestOneAddressCannotStarve(t *testing.T) {
	r := start(t, func(c *Config) {
		c.TrustedIP = netip.MustParseAddr(headIP)
		c.Limits = Limits{HeaderTimeout: time.Minute}
	})
	idle := hold(t, r, "127.0.0.2", MaxConns+50)
	if n := stillOpen(idle); n > PerIPConns {
		t.Errorf("one address holds %d connections, want at most PerIPConns=%d", n, PerIPConns)
	}
	code, took := getFrom(t, r, "127.0.0.3", "/prpc/v1/Version", token(t, "guest:version"))
	t.Logf("second address served in %v", took)
	if code != 200 {
		t.Errorf("second address: Version %d, want 200", code)
	}
	if code, _ := getFrom(t, r, headIP, "/prpc/v1/Health", healthToken(t)); code != 200 {
		t.Errorf("head's health poll: %d, want 200", code)
	}
}

// TestCrowdCannotStarve: many addresses together filling every slot cannot
// lock out the head's poll, a new authenticated caller, or an authenticated
// keep-alive connection made before them; strangers are evicted instead.
func TestCrowdCannotStarve(t *testing.T) {
	const max, perIP = 32, 4
	r := start(t, func(c *Config) {
		c.TrustedIP = netip.MustParseAddr(headIP)
		c.Limits = Limits{Max: max, PerIP: perIP, HeaderTimeout: time.Minute}
	})
	// A caller with a token, keeping its connection alive.
	kept := tls.Client(dialFrom(t, r, "127.0.0.6"), r.tlsConfig())
	defer kept.Close()
	var br *bufio.Reader
	if resp, err := request(t, r, kept, &br, "/prpc/v1/Version", token(t, "guest:version")); err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("authenticated request: %v %v", resp, err)
	}
	var crowd []net.Conn
	for i := range 20 { // 80 connections from 20 addresses, for 32 slots
		crowd = append(crowd, hold(t, r, fmt.Sprintf("127.0.1.%d", i+1), perIP)...)
	}
	if n := stillOpen(crowd); n > max {
		t.Errorf("the crowd holds %d connections, want at most Max=%d", n, max)
	}
	if code, _ := getFrom(t, r, headIP, "/prpc/v1/Health", healthToken(t)); code != 200 {
		t.Errorf("head's health poll: %d, want 200", code)
	}
	if code, _ := getFrom(t, r, "127.0.0.5", "/prpc/v1/Version", token(t, "guest:version")); code != 200 {
		t.Errorf("new authenticated caller: %d, want 200", code)
	}
	if resp, err := request(t, r, kept, &br, "/prpc/v1/Version", token(t, "guest:version")); err != nil || resp.StatusCode != 200 {
		t.Errorf("the authenticated keep-alive connection was dropped: %v %v", resp, err)
	}
}

// TestUnauthenticatedConnsHoldNothing: a connection that sends nothing is
// closed after the header timeout, and one whose request had no valid token
// is closed after its answer; one with a token is kept alive.
func TestUnauthenticatedConnsHoldNothing(t *testing.T) {
	r := start(t, func(c *Config) { c.Limits = Limits{HeaderTimeout: 200 * time.Millisecond} })
	c := dialFrom(t, r, "127.0.0.2")
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !strings.Contains(fmt.Sprint(err), "reset") {
		t.Errorf("silent connection: read %v, want it closed by the server", err)
	}
	for _, tc := range []struct {
		name, token string
		wantClose   bool
	}{
		{"no token", "", true},
		{"bad token", "x.y.z", true},
		{"valid token", token(t, "guest:version"), false},
	} {
		conn := tls.Client(dialFrom(t, r, "127.0.0.3"), r.tlsConfig())
		var br *bufio.Reader
		resp, err := request(t, r, conn, &br, "/prpc/v1/Version", tc.token)
		conn.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if resp.Close != tc.wantClose {
			t.Errorf("%s: Connection close %v, want %v", tc.name, resp.Close, tc.wantClose)
		}
	}
}

// TestServeTCPBoundsGoroutines: many idle connections from many addresses
// cost at most about Max goroutines (each admitted connection one).
func TestServeTCPBoundsGoroutines(t *testing.T) {
	const max = 40
	r := start(t, func(c *Config) { c.Limits = Limits{Max: max, PerIP: 4, HeaderTimeout: time.Minute} })
	settle := func() int {
		n := runtime.NumGoroutine()
		for range 40 {
			time.Sleep(25 * time.Millisecond)
			m := runtime.NumGoroutine()
			if m == n {
				return m
			}
			n = m
		}
		return n
	}
	before := settle()
	for i := range 50 {
		hold(t, r, fmt.Sprintf("127.0.2.%d", i+1), 4)
	}
	grown := settle() - before
	t.Logf("200 idle connections: %d more goroutines (Max %d)", grown, max)
	if grown > max+10 {
		t.Errorf("200 idle connections made %d goroutines, want at most about Max=%d", grown, max)
	}
}
