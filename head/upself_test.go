package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/server"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/wire"
)

// countingListener counts the connections its listener accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestUpTalksNotToItself: head up follows its candidates in its progress
// line and ends them with --down-on-exit through the running head's Go
// methods: its admin socket takes only the connection this test opens to
// create a candidate, none from head up itself (issue 32).
func TestUpTalksNotToItself(t *testing.T) {
	var conns atomic.Int64
	server.WrapAdmin = func(l net.Listener) net.Listener { return countingListener{l, &conns} }
	t.Cleanup(func() { server.WrapAdmin = nil })
	dir := t.TempDir()
	cfg := upConfig(t, dir, "198.51.100.9:6379")
	r := startUp(t, "--config", cfg, "--no-ray-head", "--down-on-exit", "--ip", "127.0.0.1", "--agent", os.Args[0],
		"--listen-a", "127.0.0.1:0", "--listen-b", "127.0.0.1:0")
	r.waitFor(t, "the first summary", func() bool { return strings.Contains(r.out.String(), "rentals: none yet") })
	st, err := statedir.Load(filepath.Join(dir, "cluster.state"))
	if err != nil {
		t.Fatal(err)
	}
	c := adminclient.Unix(st.Path(statedir.AdminSocket), 5*time.Second)
	if _, err := c.Create(context.Background(), wire.CandidateRequest{NodeType: "cpu", InstanceID: "ext-1", PublicIP: "198.51.100.23"}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the candidate in the summary", func() bool { return strings.Contains(r.out.String(), "rentals: 1 ") })
	if code := r.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, r.errOut.String())
	}
	if !strings.Contains(r.out.String(), "candidates ended: 1") {
		t.Errorf("--down-on-exit did not end the candidate:\n%s", r.out.String())
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the admin socket took %d connections, want 1 (this test's own): head up talked to itself\n%s", n, r.out.String())
	}
}
