package guestapi

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mdlayher/vsock"
)

func TestParseVsock(t *testing.T) {
	for _, c := range []struct {
		in        string
		cid, port uint32
		ok        bool
	}{
		{"vsock://1:8090", 1, 8090, true},
		{"vsock://4294967295:5", 4294967295, 5, true},
		{"vsock://1", 0, 0, false},
		{"vsock://x:1", 0, 0, false},
		{"vsock://1:-1", 0, 0, false},
		{"vsock://4294967296:1", 0, 0, false},
		{"tcp://1:1", 0, 0, false},
	} {
		cid, port, err := ParseVsock(c.in)
		if (err == nil) != c.ok || cid != c.cid || port != c.port {
			t.Errorf("ParseVsock(%q) = %d, %d, %v", c.in, cid, port, err)
		}
	}
}

// TestVsockLoopback serves the guest API on vsock://1:PORT (the local
// loopback CID; never CID 2, the host) and asks it for Version. When this
// kernel has no vsock loopback the test skips: the server then is proven
// only through the net.Listener interface that every TCP test uses.
func TestVsockLoopback(t *testing.T) {
	var b [2]byte
	_, _ = rand.Read(b[:])
	port := 20000 + uint32(binary.BigEndian.Uint16(b[:]))%20000
	l, err := ListenVsock(fmt.Sprintf("vsock://1:%d", port))
	if err != nil {
		t.Skipf("SKIPPING: vsock loopback (CID 1) unavailable here (%v); the server is tested through net.Listener with TCP instead", err)
	}
	r := start(t, func(c *Config) {
		c.NodeCertPEM, c.NodeKeyPEM, c.CACertPEM = nil, nilKey(), nil
		c.Policy.AnonymousScopes = []string{"guest:version"}
	})
	go r.srv.ServeTCP(l)
	conn, err := vsock.Dial(1, port, nil)
	if err != nil {
		t.Skipf("SKIPPING: vsock loopback dial to CID 1 failed (%v); the server is tested through net.Listener with TCP instead", err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /prpc/v1/Version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"protocol":1`) {
		t.Errorf("vsock Version: %d %s", resp.StatusCode, body)
	}
}
