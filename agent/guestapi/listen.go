package guestapi

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/mdlayher/vsock"
)

// VsockScheme starts a vsock listen address: vsock://CID:PORT.
const VsockScheme = "vsock://"

// ParseVsock parses vsock://CID:PORT.
func ParseVsock(addr string) (cid, port uint32, err error) {
	rest, ok := strings.CutPrefix(addr, VsockScheme)
	if !ok {
		return 0, 0, fmt.Errorf("vsock address %q: want vsock://CID:PORT", addr)
	}
	c, p, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, 0, fmt.Errorf("vsock address %q: want vsock://CID:PORT", addr)
	}
	c64, err1 := strconv.ParseUint(c, 10, 32)
	p64, err2 := strconv.ParseUint(p, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("vsock address %q: CID and PORT must be decimal 32-bit numbers", addr)
	}
	return uint32(c64), uint32(p64), nil
}

// ListenVsock listens on vsock://CID:PORT (CID: the local context id to bind,
// e.g. 4294967295 for any, or 1 for loopback).
func ListenVsock(addr string) (net.Listener, error) {
	cid, port, err := ParseVsock(addr)
	if err != nil {
		return nil, err
	}
	l, err := vsock.ListenContextID(cid, port, nil)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return l, nil
}

// Listen listens on a vsock://CID:PORT address or a TCP host:port.
func Listen(addr string) (net.Listener, error) {
	if strings.HasPrefix(addr, VsockScheme) {
		return ListenVsock(addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return l, nil
}
