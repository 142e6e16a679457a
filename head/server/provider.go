package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/rayvast/rayvast/head/agentbin"
	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/internal/wire"
)

// ProviderKind is --provider when given, else the config's provider.kind,
// else none (an external provider drives the admin API).
func ProviderKind(flagValue string, cfg *config.Config) string {
	switch {
	case flagValue != "":
		return flagValue
	case cfg.Provider != nil && cfg.Provider.Kind != "":
		return cfg.Provider.Kind
	}
	return wire.ProviderNone
}

// PrivateNetwork is the config's provider.private_network: the nodes of an
// external provider reach the head over a network of the user's own.
func PrivateNetwork(cfg *config.Config) bool {
	return cfg.Provider != nil && cfg.Provider.PrivateNetwork
}

// loadAgent reads --agent, or takes the agent built into head.
func loadAgent(path string) ([]byte, error) {
	if path == "" {
		return agentbin.Agent()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read agent: %w", err)
	}
	return b, nil
}

// startProvider is serve's provider: its settings read, the candidate
// image a docker provider needs built (a step of its own: the provider
// builds none), the provider opened; nil for kind none.
func startProvider(ctx context.Context, kind string, cfg *config.Config, block *blocklist.List, o provider.Options) (provider.Provider, error) {
	ps, err := ReadProviderSettings(kind, cfg.Provider)
	if err != nil {
		return nil, err
	}
	if prepare := kinds[kind].prepare; prepare != nil {
		if err := prepare(ctx, &ps, cfg.Ray.Version, o.Log); err != nil {
			return nil, err
		}
	}
	return OpenProvider(ctx, ps, block, o)
}

// OpenProvider opens the built-in provider of ps; nil for kind none. It
// prepares nothing: ps.docker.Image must be set (ensureCandidateImage).
func OpenProvider(ctx context.Context, ps ProviderSettings, block *blocklist.List, o provider.Options) (provider.Provider, error) {
	if open := kinds[ps.kind].open; open != nil {
		return open(ctx, ps, block, o)
	}
	return nil, nil
}

// ensureCandidateImage builds (or finds cached) the candidate image of a
// docker provider whose settings name none: real Ray of the cluster's
// version (from a venv of this machine, made from ps.rayWheels or the
// package index), else the stand-in. The first build takes minutes; its
// progress goes to log.
func ensureCandidateImage(ctx context.Context, ps *ProviderSettings, rayVersion string, log *slog.Logger) error {
	if ps.docker.Image != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	img, err := candidateimage.Build(ctx, candidateimage.Config{Log: log, RayVersion: rayVersion, RayWheels: ps.rayWheels})
	if err != nil {
		return fmt.Errorf("docker provider: %w (or set %s)", err, docker.EnvImage)
	}
	ps.docker.Image = img
	return nil
}
