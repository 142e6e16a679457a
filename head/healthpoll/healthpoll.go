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
	"github.com/rayvast/rayvast/internal/wire"
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

// Streak counts consecutive failed polls of one node and turns them into
// its health: unhealthy from the threshold-th failure in a row, healthy
// again at the first success. Not safe for concurrent use (keep one per node
// under the registry's lock).
type Streak struct {
	Threshold int // failure_threshold; <1 means 1
	failures  int
	health    string
}

// Record notes one poll's result and returns the node's health and its
// consecutive failure count.
func (s *Streak) Record(err error) (health string, failures int) {
	if err == nil {
		s.failures, s.health = 0, wire.HealthHealthy
		return s.health, 0
	}
	s.failures++
	th := s.Threshold
	if th < 1 {
		th = 1
	}
	if s.failures >= th {
		s.health = wire.HealthUnhealthy
	} else if s.health == "" {
		s.health = wire.HealthUnknown
	}
	return s.health, s.failures
}
