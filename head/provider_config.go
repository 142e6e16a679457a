package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/rayvast/rayvast/head/agentbin"
	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/internal/wire"
)

// providerKind is --provider when given, else the config's provider.kind,
// else none (an external provider drives the admin API).
func providerKind(flagValue string, cfg *config.Config) string {
	switch {
	case flagValue != "":
		return flagValue
	case cfg.Provider != nil && cfg.Provider.Kind != "":
		return cfg.Provider.Kind
	}
	return "none"
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

// newProvider builds the built-in provider; nil for "none". pc is the
// config's provider block (nil: none): vast takes it as its settings, else
// the RAYVAST_VAST_CONFIG file; the environment knobs of each provider's
// package still apply, so the old flags keep working.
func newProvider(name string, pc *wire.ProviderConfig, block *blocklist.List, o provider.Options) (provider.Provider, error) {
	if pc != nil && pc.Kind != name {
		pc = nil // --provider chose another kind: the block is not its settings
	}
	switch name {
	case "none", "":
		return nil, nil
	case "docker":
		if pc != nil && pc.Image != "" && os.Getenv(docker.EnvImage) == "" {
			os.Setenv(docker.EnvImage, pc.Image)
		}
		var net docker.NetOptions // the block's knobs of vast's network; the env's win
		if pc != nil && pc.Kind == "docker" {
			net = docker.NetOptions{Hairpin: pc.Hairpin, PerIP: pc.PerIP}
		}
		return docker.NewWithNet(o, net) // its errors say "docker provider: …"
	case "vast":
		if pc != nil {
			p, err := vast.NewFromSettings(o, block, *pc)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return p, nil
		}
		return vast.New(o, block) // its errors say "vast provider: …"
	default:
		return nil, fmt.Errorf("--provider %s: want none, docker or vast", strconv.Quote(name))
	}
}
