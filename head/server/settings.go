package server

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// ProviderSettings is what the head rents with: the provider's kind and
// its typed settings, read once from --provider, the config's provider
// block and the environment. This is the only place the head reads the
// providers' environment variables; the providers take the values.
type ProviderSettings struct {
	kind   string          // one of config.ProviderKinds
	docker docker.Settings // kind docker; Image "" until ensureCandidateImage
	// rayWheels is where a docker candidate image's real Ray comes from
	// ("" the package index).
	rayWheels string
	vast      vast.Settings // kind vast
	vastKey   secret.String
}

// ReadProviderSettings reads the settings of kind from the config's
// provider block pc (nil: none) and the process environment, which wins.
// VAST_API_KEY, once read, leaves the environment: no child inherits it.
func ReadProviderSettings(kind string, pc *wire.ProviderConfig) (ProviderSettings, error) {
	ps, err := parseProviderSettings(kind, pc, os.Getenv)
	if ps.kind == wire.ProviderVast && strings.TrimSpace(os.Getenv(vast.EnvAPIKey)) != "" {
		os.Unsetenv(vast.EnvAPIKey)
	}
	return ps, err
}

// parseProviderSettings is ReadProviderSettings with the environment as
// getenv. A block of another kind than kind (--provider chose another)
// is not its settings.
func parseProviderSettings(kind string, pc *wire.ProviderConfig, getenv func(string) string) (ProviderSettings, error) {
	if err := config.CheckProviderKind(kind); err != nil {
		return ProviderSettings{}, fmt.Errorf("--provider %w", err)
	}
	if pc != nil && pc.Kind != kind {
		pc = nil
	}
	ps := ProviderSettings{kind: kind}
	if read := kinds[kind].settings; read != nil {
		return ps, read(&ps, pc, getenv)
	}
	return ps, nil
}

// dockerSettings: the block's image and network knobs, then
// RAYVAST_DOCKER_*.
func dockerSettings(pc *wire.ProviderConfig, getenv func(string) string) (docker.Settings, error) {
	var s docker.Settings
	if pc != nil {
		s.Image = pc.Image
		s.Net = vastnet.Options{Hairpin: pc.Hairpin, PerIP: pc.PerIP}
	}
	if v := getenv(docker.EnvImage); v != "" {
		s.Image = v
	}
	for _, t := range strings.Split(getenv(docker.EnvUnsafeNodeTypes), ",") {
		if t = strings.TrimSpace(t); t != "" {
			s.UnsafeNodeTypes = append(s.UnsafeNodeTypes, t)
		}
	}
	if v := getenv(docker.EnvMemoryMB); v != "" {
		mb, err := strconv.ParseInt(v, 10, 64)
		if err != nil || mb < 6 || mb > 1<<30 {
			return s, fmt.Errorf("docker provider: %s=%q: want a number of MiB (at least 6)", docker.EnvMemoryMB, v)
		}
		s.MemoryBytes = mb << 20
	}
	if v := getenv(docker.EnvHairpin); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("docker provider: %s=%q: want 1 or 0", docker.EnvHairpin, v)
		}
		s.Net.Hairpin = on
	}
	if v := getenv(docker.EnvPerIP); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > vastnet.MaxPerIP {
			return s, fmt.Errorf("docker provider: %s=%q: want 1 to %d candidates per public IP", docker.EnvPerIP, v, vastnet.MaxPerIP)
		}
		s.Net.PerIP = n
	}
	return s, nil
}

// vastSettings: the block, else the RAYVAST_VAST_CONFIG file; the base URL
// from RAYVAST_VAST_URL when set; the key from VAST_API_KEY, else the file
// RAYVAST_VAST_API_KEY_FILE, else the settings' api_key_file.
func vastSettings(pc *wire.ProviderConfig, getenv func(string) string) (vast.Settings, secret.String, error) {
	var st vast.Settings
	if pc != nil {
		st = *pc
	} else if path := getenv(vast.EnvSettings); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return st, secret.String{}, fmt.Errorf("vast provider: %s: %w", vast.EnvSettings, err)
		}
		if err := wire.Decode(strings.NewReader(string(b)), 1<<20, &st); err != nil {
			return st, secret.String{}, fmt.Errorf("vast provider: %s %s: %w", vast.EnvSettings, path, err)
		}
	}
	if u := getenv(vast.EnvBaseURL); u != "" {
		st.BaseURL = u
	}
	key, err := vastKey(st.APIKeyFile, getenv)
	return st, key, err
}

func vastKey(settingsFile string, getenv func(string) string) (secret.String, error) {
	if k := strings.TrimSpace(getenv(vast.EnvAPIKey)); k != "" {
		return secret.New(k), nil
	}
	path := getenv(vast.EnvAPIKeyFile)
	if path == "" {
		path = settingsFile
	}
	if path == "" {
		return secret.String{}, fmt.Errorf("vast provider: no API key: set %s or %s (a file)", vast.EnvAPIKey, vast.EnvAPIKeyFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return secret.String{}, fmt.Errorf("vast provider: read API key file: %w", err)
	}
	k := strings.TrimSpace(string(b))
	if k == "" {
		return secret.String{}, fmt.Errorf("vast provider: API key file %s is empty", path)
	}
	return secret.New(k), nil
}
