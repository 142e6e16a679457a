// Package guestclient is the head's HTTPS client for nodes' guest APIs (the
// health poll, `head logs`, `head node`): it trusts the cluster CA only and
// names the node by its public IP, which every node cert carries as an IP
// SAN (docs/protocol.md §7), so a host that answers on a node's port with another
// certificate is refused.
package guestclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// DefaultTimeout bounds one request.
const DefaultTimeout = 5 * time.Second

// MaxBody is the most of an answer that is read (a log tail is 256 KiB).
const MaxBody = 1 << 20

// Client calls guest APIs. Safe for concurrent use.
type Client struct {
	CA      *x509.CertPool // the cluster CA: the only root node certs chain to
	Timeout time.Duration  // per request; 0 = DefaultTimeout
}

// Get fetches https://ip:port+path with the bearer token and returns the
// status and at most MaxBody bytes of the body. Errors never contain the
// token.
func (c Client) Get(ctx context.Context, ip string, port int, path, token string) (int, []byte, error) {
	if c.CA == nil {
		return 0, nil, errors.New("guest api: no cluster CA")
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("guest api %s: %w", addr, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: c.CA, ServerName: ip, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
		Proxy:             nil,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("guest api %s: %w", addr, stripURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("guest api %s: read answer: %w", addr, err)
	}
	return resp.StatusCode, body, nil
}

// stripURL drops *url.Error's wrapper text (it holds the URL, never the
// token, but keeps errors short and stable).
func stripURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}
