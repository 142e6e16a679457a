package rvtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// dockerSocket is the Docker Engine's socket (dockerengine.DefaultSocket;
// not imported, so dockerengine's own tests can use this package).
const dockerSocket = "/var/run/docker.sock"

// NeedDocker passes Need the reason a Docker Engine test cannot run: not
// root, or no engine answering on its socket.
func NeedDocker(t TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Need(t, fmt.Sprintf("needs root and Docker (euid %d)", os.Geteuid()))
		return
	}
	if err := pingDocker(dockerSocket); err != nil {
		Need(t, "no Docker Engine: "+err.Error())
	}
}

// pingDocker asks the engine at sock for GET /_ping.
func pingDocker(sock string) error {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	resp, err := c.Get("http://docker/_ping")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /_ping on %s: %s", sock, resp.Status)
	}
	return nil
}
