// Package config reads and validates the head's config file (docs/protocol.md §8). A
// config that would make the head misbehave later is refused at start, with a
// reason a person can act on.
package config

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/wire"
)

// Defaults for the optional knobs.
const (
	DefaultHeartbeatInterval      = 30 * time.Second
	DefaultHealthFailureThreshold = 3
	maxConfig                     = 1 << 20
)

// Config is a validated config with its defaults applied.
type Config struct {
	wire.Config
	HeartbeatInterval time.Duration
}

// Load reads and validates the config file at path.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(bytes.NewReader(b))
}

// Parse decodes a config strictly (unknown fields, wrong types and trailing
// data are errors) and validates it.
func Parse(r io.Reader) (*Config, error) {
	var c wire.Config
	if err := wire.Decode(r, maxConfig, &c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := Validate(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if c.HealthFailureThreshold == 0 {
		c.HealthFailureThreshold = DefaultHealthFailureThreshold
	}
	iv := DefaultHeartbeatInterval
	if c.HeartbeatIntervalS > 0 {
		iv = time.Duration(c.HeartbeatIntervalS) * time.Second
	}
	if c.GuestAPI.AnonymousScopes == nil {
		c.GuestAPI.AnonymousScopes = []string{}
	}
	if c.GuestAPI.ExternalIssuers == nil {
		c.GuestAPI.ExternalIssuers = []wire.Issuer{}
	}
	return &Config{Config: c, HeartbeatInterval: iv}, nil
}

// Validate returns the first thing wrong with c.
func Validate(c *wire.Config) error {
	if err := validateHostPort(c.Ray.HeadAddress); err != nil {
		return fmt.Errorf("ray.head_address: %w", err)
	}
	if err := validateRay(c.Ray); err != nil {
		return err
	}
	if len(c.NodeTypes) == 0 {
		return fmt.Errorf("node_types: at least one node type is needed")
	}
	names := make([]string, 0, len(c.NodeTypes))
	for n := range c.NodeTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := c.NodeTypes[n]
		if !wire.ValidInstanceID(n) {
			return fmt.Errorf("node_types: name %q must be 1-64 of [A-Za-z0-9._-]", n)
		}
		if t.GPUs < 0 {
			return fmt.Errorf("node_types.%s.gpus: must not be negative", n)
		}
		if t.MaxWorkers < 0 || t.MinWorkers < 0 {
			return fmt.Errorf("node_types.%s: worker counts must not be negative", n)
		}
		if t.MinWorkers > t.MaxWorkers {
			return fmt.Errorf("node_types.%s: min_workers above max_workers", n)
		}
		for k, v := range t.Resources {
			if k == "" || v < 0 {
				return fmt.Errorf("node_types.%s.resources: empty name or negative amount", n)
			}
		}
		if err := validateNodeTypeRay(n, t); err != nil {
			return err
		}
	}
	for _, s := range c.GuestAPI.AnonymousScopes {
		if _, err := guestauth.ParseScope(s); err != nil {
			return fmt.Errorf("guest_api.anonymous_scopes: %w", err)
		}
	}
	for i, is := range c.GuestAPI.ExternalIssuers {
		if is.Name == "" {
			return fmt.Errorf("guest_api.external_issuers[%d].name: empty", i)
		}
		if len(is.PublicKeys) == 0 {
			return fmt.Errorf("guest_api.external_issuers[%d] (%s): no public_keys", i, is.Name)
		}
		for j, k := range is.PublicKeys {
			if b, err := hex.DecodeString(k); err != nil || len(b) != 32 {
				return fmt.Errorf("guest_api.external_issuers[%d].public_keys[%d]: want 64 hex chars (32-byte Ed25519 key)", i, j)
			}
		}
	}
	if err := validateProvider(c); err != nil {
		return err
	}
	if a := c.Autoscaler; a != nil && a.IdleTimeoutMinutes < 0 {
		return fmt.Errorf("autoscaler.idle_timeout_minutes: must not be negative")
	}
	if c.HeartbeatIntervalS < 0 {
		return fmt.Errorf("heartbeat_interval_s: must not be negative")
	}
	if err := validateUnheard(c); err != nil {
		return err
	}
	if c.HealthFailureThreshold < 0 {
		return fmt.Errorf("health_failure_threshold: must not be negative")
	}
	return nil
}

func validateHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want ip:port: %w", err)
	}
	if host == "" {
		return fmt.Errorf("want ip:port: empty host")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("want ip:port: bad port")
	}
	return nil
}
