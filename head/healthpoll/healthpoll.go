// Package healthpoll is the head's side of the guest API's v1 Health: it
// presents a node's own guest:health token (sent in its heartbeats) and
// verifies the node's HTTPS cert against the cluster CA only.
package healthpoll

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/rayvast/rayvast/head/guestclient"
)

// HealthPath is the v1 Health method the head polls.
const HealthPath = "/prpc/v1/Health"

// DefaultTimeout bounds one poll.
const DefaultTimeout = 5 * time.Second

// Config builds a Poller.
type Config struct {
	CA      *x509.CertPool // the cluster CA: the only root node certs chain to
	Timeout time.Duration  // per poll; 0 = DefaultTimeout
}

// Poller polls nodes' guest APIs. Safe for concurrent use.
type Poller struct {
	ca      *x509.CertPool
	timeout time.Duration
}

// New returns a Poller.
func New(cfg Config) *Poller {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Poller{ca: cfg.CA, timeout: cfg.Timeout}
}

// Check GETs https://ip:port/prpc/v1/Health with the bearer token through
// guestclient (the cluster CA only, the node's IP as the server name). nil
// only on 200; a 401 is a failure like any other. The error never contains
// the token.
func (p *Poller) Check(ctx context.Context, ip string, port int, token string) error {
	if p.ca == nil {
		return errors.New("health poll: no cluster CA")
	}
	st, _, err := guestclient.Client{CA: p.ca, Timeout: p.timeout}.Get(ctx, ip, port, HealthPath, token)
	if err != nil {
		return fmt.Errorf("health poll: %w", err)
	}
	if st != http.StatusOK {
		return fmt.Errorf("health poll %s: status %d", net.JoinHostPort(ip, strconv.Itoa(port)), st)
	}
	return nil
}
