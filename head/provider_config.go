package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// config's provider block (nil: none); the environment knobs of each
// provider's package still apply where the block says nothing, so the old
// flags and RAYVAST_VAST_CONFIG keep working.
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
		return docker.New(o) // its errors say "docker provider: …"
	case "vast":
		if pc != nil && os.Getenv(vast.EnvSettings) == "" {
			if err := vastSettingsFile(pc, o.StateDir); err != nil {
				return nil, err
			}
		}
		return vast.New(o, block) // its errors say "vast provider: …"
	default:
		return nil, fmt.Errorf("--provider %s: want none, docker or vast", strconv.Quote(name))
	}
}

// vastSettingsFile hands the config's provider block to the vast provider
// through the file RAYVAST_VAST_CONFIG names (the provider's only settings
// input today): the block's fields are the provider's Settings.
func vastSettingsFile(pc *wire.ProviderConfig, stateDir string) error {
	st := vast.Settings{BaseURL: pc.BaseURL, APIKeyFile: pc.APIKeyFile, Image: pc.Image, DiskGB: pc.DiskGB,
		NodeTypes: map[string]vast.OfferSpec{}}
	for n, o := range pc.NodeTypes {
		st.NodeTypes[n] = vast.OfferSpec(o)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	path := filepath.Join(stateDir, "vast-settings.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("vast provider: write settings: %w", err)
	}
	return os.Setenv(vast.EnvSettings, path)
}
