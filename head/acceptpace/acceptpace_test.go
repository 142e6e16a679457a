package acceptpace

import (
	"errors"
	"net"
	"testing"
	"time"
)

// fakeListener hands out connections without a network: the pacing is
// what is under test.
type fakeListener struct {
	closed bool
}

func (f *fakeListener) Accept() (net.Conn, error) {
	if f.closed {
		return nil, net.ErrClosed
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}
func (f *fakeListener) Close() error   { f.closed = true; return nil }
func (f *fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

// clock is a manual clock whose sleep advances it.
type clock struct {
	t     time.Time
	slept time.Duration
}

func (c *clock) now() time.Time { return c.t }
func (c *clock) sleep(d time.Duration) {
	c.slept += d
	c.t = c.t.Add(d)
}

// TestPaceBurstThenRate proves Accept lets a burst through at once, then
// waits one interval per connection, and that idle time refills the burst
// (no more than the burst).
func TestPaceBurstThenRate(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	l := New(&fakeListener{}, 100, 5, c.now, c.sleep) // 10 ms per connection
	for i := range 5 {
		if _, err := l.Accept(); err != nil {
			t.Fatal(err)
		}
		if c.slept != 0 {
			t.Fatalf("connection %d of the burst waited %v", i+1, c.slept)
		}
	}
	for i := range 10 {
		if _, err := l.Accept(); err != nil {
			t.Fatal(err)
		}
		if want := time.Duration(i+1) * 10 * time.Millisecond; c.slept != want {
			t.Fatalf("after %d paced connections slept %v, want %v", i+1, c.slept, want)
		}
	}
	c.t = c.t.Add(time.Hour) // idle: the bucket refills to the burst, not beyond
	before := c.slept
	for range 5 {
		l.Accept()
	}
	if c.slept != before {
		t.Fatalf("a refilled burst waited %v", c.slept-before)
	}
	l.Accept()
	if c.slept-before != 10*time.Millisecond {
		t.Fatalf("first connection past the refilled burst waited %v, want 10ms", c.slept-before)
	}
}

// TestPaceClosed proves a closed listener's error comes through.
func TestPaceClosed(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	f := &fakeListener{}
	l := New(f, 100, 1, c.now, c.sleep)
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
}

// TestPaceRealListener proves the wrapper serves real TCP connections
// with the real clock (a burst larger than the test's connections, so
// nothing waits).
func TestPaceRealListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, 1000, 8, nil, nil)
	defer l.Close()
	go func() {
		for range 3 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err == nil {
				c.Write([]byte("x"))
				c.Close()
			}
		}
	}()
	for range 3 {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil || b[0] != 'x' {
			t.Fatalf("read %q %v", b, err)
		}
		c.Close()
	}
}
