package portcheck

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// After a check, every one of the agent's 64 ports can be bound again
// without SO_REUSEADDR, the way Ray's raylet checks a worker port before
// handing it to a worker (a port in TCP TIME_WAIT fails that bind for a
// minute). The head closes first, so the TIME_WAIT is on its own ephemeral
// ports, never on the agent's.
func TestAgentPortsFreeForRayAfterCheck(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 64)
	l, err := Listen("127.0.0.1", ports, testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(context.Background(), CheckConfig{}, "127.0.0.1", ports, testKey); err != nil {
		t.Fatalf("Check = %v, want nil", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var taken []int
	for _, p := range ports {
		if err := bindNoReuse(p); err != nil {
			taken = append(taken, p)
		}
	}
	if len(taken) > 0 {
		t.Fatalf("%d of 64 ports cannot be bound without SO_REUSEADDR after the check (first %d), as Ray's raylet binds them: the agent closed first and left them in TIME_WAIT", len(taken), taken[0])
	}
}

// bindNoReuse binds 127.0.0.1:port on a plain socket, as Ray's port check
// does (no SO_REUSEADDR), and closes it.
func bindNoReuse(port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// The head takes the reply line and closes; it does not wait for the agent
// to close (the agent waits for the head's close), so a port that answers
// and holds the connection passes at once.
func TestCheckClosesFirst(t *testing.T) {
	ports := rvtest.FreePorts(t, "127.0.0.1", 64)
	holder := 5
	listenAgent(t, "127.0.0.1", without(ports, holder), testKey)
	closedByHead := make(chan bool, 1)
	fakePort(t, "127.0.0.1", ports[holder], func(c net.Conn, port int) {
		nonce, _ := readChallenge(c)
		io.WriteString(c, Response(testKey, nonce, port)+"\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.Copy(io.Discard, c) // nil at the head's FIN
		closedByHead <- err == nil
	})
	start := time.Now()
	if err := Check(context.Background(), CheckConfig{ReplyTimeout: 2 * time.Second}, "127.0.0.1", ports, testKey); err != nil {
		t.Fatalf("Check = %v, want nil", err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("Check took %v: it waited for the agent's close", d)
	}
	if !<-closedByHead {
		t.Error("the head did not close the connection first")
	}
}
