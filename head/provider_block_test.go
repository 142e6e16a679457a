package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestVastProviderBlock: with a provider block of kind vast in the config,
// `--provider vast` builds the provider from it (its base_url is used),
// not from RAYVAST_VAST_CONFIG.
func TestVastProviderBlock(t *testing.T) {
	t.Setenv("VAST_API_KEY", "k-provider-block")
	t.Setenv("RAYVAST_VAST_URL", "")
	t.Setenv("RAYVAST_VAST_CONFIG", "")
	o := provider.Options{Cluster: "c"}
	bl := blocklist.New(time.Now)
	p, err := newProvider("vast", &wire.ProviderConfig{Kind: "vast", BaseURL: "http://127.0.0.1:1", Image: "img"}, bl, o)
	if err != nil || p == nil || p.Name() != "vast" {
		t.Fatalf("newProvider = %v, %v", p, err)
	}
	t.Setenv("VAST_API_KEY", "k-provider-block")
	_, err = newProvider("vast", &wire.ProviderConfig{Kind: "vast", BaseURL: "ftp://x"}, bl, o)
	if err == nil || !strings.Contains(err.Error(), "base URL") {
		t.Errorf("a bad base_url in the block: err = %v, want it refused (the block was read)", err)
	}
}
