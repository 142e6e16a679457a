package server

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

const testVastKey = "vast-test-key-5e2d8c41a9"

// env is a getenv of a fixed environment.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestVastProviderBlock: with a provider block of kind vast in the config,
// `--provider vast` builds the provider from it (its base_url is used),
// not from RAYVAST_VAST_CONFIG.
func TestVastProviderBlock(t *testing.T) {
	o := provider.Options{Cluster: "c"}
	bl := blocklist.New(time.Now)
	getenv := env(map[string]string{vast.EnvAPIKey: "k-provider-block", vast.EnvSettings: "/nonexistent/vast.json"})
	ps, err := parseProviderSettings("vast", &wire.ProviderConfig{Kind: "vast", BaseURL: "http://127.0.0.1:1", Image: "img"}, getenv)
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	p, err := OpenProvider(context.Background(), ps, bl, o)
	if err != nil || p == nil || p.Name() != "vast" {
		t.Fatalf("OpenProvider = %v, %v", p, err)
	}
	ps, err = parseProviderSettings("vast", &wire.ProviderConfig{Kind: "vast", BaseURL: "ftp://x"}, getenv)
	if err == nil {
		_, err = OpenProvider(context.Background(), ps, bl, o)
	}
	if err == nil || !strings.Contains(err.Error(), "base URL") {
		t.Errorf("a bad base_url in the block: err = %v, want it refused (the block was read)", err)
	}
}

// TestVastSettingsFromEnv: the key comes from VAST_API_KEY or a file; no
// key, a bad URL or a settings file with unknown fields is refused with a
// clear error; the key is never logged.
func TestVastSettingsFromEnv(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, []byte(testVastKey+"\n"), 0o600)
	good := filepath.Join(dir, "vast.json")
	os.WriteFile(good, []byte(`{"image":"img:1","node_types":{"gpu":{"gpu_name":"RTX 4090","max_dph":0.4}}}`), 0o600)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"imagee":"x"}`), 0o600)

	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"key from env", map[string]string{vast.EnvAPIKey: testVastKey, vast.EnvSettings: good}, ""},
		{"key from file", map[string]string{vast.EnvAPIKeyFile: keyFile, vast.EnvBaseURL: "http://127.0.0.1:1"}, ""},
		{"no key", map[string]string{}, "no API key"},
		{"missing key file", map[string]string{vast.EnvAPIKeyFile: filepath.Join(dir, "vast.json.missing")}, "read API key file"},
		{"bad url", map[string]string{vast.EnvAPIKey: testVastKey, vast.EnvBaseURL: "ftp://x"}, "base URL"},
		{"unknown settings field", map[string]string{vast.EnvAPIKey: testVastKey, vast.EnvSettings: bad}, "imagee"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			ps, err := parseProviderSettings("vast", nil, env(tt.env))
			if err == nil {
				_, err = OpenProvider(context.Background(), ps, nil, provider.Options{Cluster: "c", Log: slog.New(slog.NewTextHandler(&logs, nil))})
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("open: %v", err)
			}
			if strings.Contains(logs.String(), testVastKey) || (err != nil && strings.Contains(err.Error(), testVastKey)) {
				t.Error("key leaked")
			}
		})
	}
}

// TestVastKeyLeavesEnv: VAST_API_KEY, once read, is removed from the
// head's environment, so no child process inherits it.
func TestVastKeyLeavesEnv(t *testing.T) {
	t.Setenv(vast.EnvAPIKey, testVastKey)
	t.Setenv(vast.EnvSettings, "")
	t.Setenv(vast.EnvBaseURL, "")
	ps, err := ReadProviderSettings("vast", nil)
	if err != nil || ps.vastKey.Reveal() != testVastKey {
		t.Fatalf("settings: key read %v, err %v", ps.vastKey.Reveal() == testVastKey, err)
	}
	if os.Getenv(vast.EnvAPIKey) != "" {
		t.Error("VAST_API_KEY left in the environment")
	}
}

// TestDockerSettingsFromEnv: the environment's knobs win over the config's
// block and bad values are refused with the variable's name.
func TestDockerSettingsFromEnv(t *testing.T) {
	block := &wire.ProviderConfig{Kind: "docker", Image: "block:1", Hairpin: true, PerIP: 3}
	ps, err := parseProviderSettings("docker", block, env(nil))
	if err != nil || ps.docker.Image != "block:1" || ps.docker.Net != (vastnet.Options{Hairpin: true, PerIP: 3}) {
		t.Errorf("no env: %+v, %v; want the block's", ps.docker, err)
	}
	ps, err = parseProviderSettings("docker", block, env(map[string]string{docker.EnvHairpin: "0", docker.EnvPerIP: "2",
		docker.EnvImage: "env:1", docker.EnvUnsafeNodeTypes: " risky, ,odd", docker.EnvMemoryMB: "512"}))
	if err != nil || ps.docker.Image != "env:1" || ps.docker.Net != (vastnet.Options{PerIP: 2}) ||
		strings.Join(ps.docker.UnsafeNodeTypes, "|") != "risky|odd" || ps.docker.MemoryBytes != 512<<20 {
		t.Errorf("env: %+v, %v", ps.docker, err)
	}
	if ps, _ := parseProviderSettings("docker", &wire.ProviderConfig{Kind: "vast", Image: "vast:1"}, env(nil)); ps.docker.Image != "" {
		t.Errorf("image %q from a vast block, want none", ps.docker.Image)
	}
	for k, v := range map[string]string{docker.EnvHairpin: "maybe", docker.EnvPerIP: "17", docker.EnvMemoryMB: "5"} {
		t.Run(k, func(t *testing.T) {
			if _, err := parseProviderSettings("docker", nil, env(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%s=%s: %v, want an error naming it", k, v, err)
			}
		})
	}
	if _, err := parseProviderSettings("dockr", nil, env(nil)); err == nil || !strings.Contains(err.Error(), "want none, docker or vast") {
		t.Errorf("kind dockr: %v", err)
	}
}

// TestEnsureCandidateImage: a docker provider whose settings name no image
// gets the candidate image, built or cached (here the stand-in's, found
// from the repo root as `head serve` run there finds it); one that names
// an image, or another kind, builds nothing.
func TestEnsureCandidateImage(t *testing.T) {
	rvtest.NeedDocker(t)
	t.Chdir("../..") // the repo root: test/fakeray
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ps := ProviderSettings{kind: "docker"}
	if err := ensureCandidateImage(ctx, &ps, "", nil); err != nil || !strings.HasPrefix(ps.docker.Image, candidateimage.CandidateRepo+":") {
		t.Fatalf("image %q, %v; want a %s image", ps.docker.Image, err, candidateimage.CandidateRepo)
	}
	ps = ProviderSettings{kind: "docker", docker: docker.Settings{Image: "mine:1"}}
	if err := kinds[ps.kind].prepare(ctx, &ps, "", nil); err != nil || ps.docker.Image != "mine:1" {
		t.Errorf("kind docker naming mine:1: image %q, %v; want it untouched", ps.docker.Image, err)
	}
	for _, k := range []string{"vast", "none"} {
		if kinds[k].prepare != nil {
			t.Errorf("kind %s prepares something", k)
		}
	}
}
