package mesh

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/pki"
)

// TestMeshCarriesBulkExactly proves the copies' buffering (records
// gathered by no-wait reads, records split across the read buffer, pooled
// buffers borrowed per read) loses, repeats and reorders nothing: 24 MiB
// of random bytes written in odd-sized pieces reach an echo listener on
// the far member and come back byte for byte, then the half-close still
// arrives after the last byte.
func TestMeshCarriesBulkExactly(t *testing.T) {
	ca, _, _ := pki.NewCA(nil, "c", time.Now())
	a, _ := twoNodes(t, ca, "127.0.21.1", "127.0.21.2")
	l, err := net.Listen("tcp", "127.0.21.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c) // echo until our half-close, then close
		c.Close()
	}()

	line, c := ask(t, a, "127.0.21.2", l.Addr().(*net.TCPAddr).Port)
	if line != "C\n" {
		t.Fatalf("answer %q, want C", line)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	want := make([]byte, 24<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	go func() {
		for p := want; len(p) > 0; {
			n := min(len(p), 1+r.IntN(300<<10))
			if _, err := c.Write(p[:n]); err != nil {
				return
			}
			p = p[n:]
		}
		c.(*net.TCPConn).CloseWrite()
	}()
	got := make([]byte, 0, len(want))
	buf := make([]byte, 77<<10)
	for {
		n, err := c.Read(buf[:1+rand.IntN(len(buf))])
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("echo: %d bytes back of %d, first difference at %d", len(got), len(want), i)
	}
}
