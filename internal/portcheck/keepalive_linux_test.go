package portcheck

import (
	"context"
	"net"
	"syscall"
	"testing"
)

// TestNoKeepAlive proves both ends of a check connection skip TCP
// keep-alive (listenopts.go, the default Dial): SO_KEEPALIVE is off on the
// head's dialled socket and on the agent's accepted one.
func TestNoKeepAlive(t *testing.T) {
	ln, err := listenConfig.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	dialled, err := CheckConfig{}.withDefaults().Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer dialled.Close()
	agent := <-accepted
	if agent == nil {
		t.Fatal("accept failed")
	}
	defer agent.Close()
	for name, c := range map[string]net.Conn{"head's dialled": dialled, "agent's accepted": agent} {
		raw, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var on int
		var gerr error
		raw.Control(func(fd uintptr) { on, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE) })
		if gerr != nil || on != 0 {
			t.Errorf("%s connection: SO_KEEPALIVE = %d (%v), want 0", name, on, gerr)
		}
	}
}
