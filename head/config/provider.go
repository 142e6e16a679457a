package config

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/rayvast/rayvast/internal/wire"
)

// ProviderKinds are the kinds of provider.kind (docs/protocol.md §8) and of the head's
// --provider: none (an external provider drives the admin API), or one
// of the built-in providers.
var ProviderKinds = []string{wire.ProviderNone, wire.ProviderDocker, wire.ProviderVast}

// CheckProviderKind refuses a kind not in ProviderKinds.
func CheckProviderKind(kind string) error {
	if slices.Contains(ProviderKinds, kind) {
		return nil
	}
	return fmt.Errorf("%q: want %s", kind, kindList())
}

// kindList is "none, docker or vast".
func kindList() string {
	n := len(ProviderKinds)
	return strings.Join(ProviderKinds[:n-1], ", ") + " or " + ProviderKinds[n-1]
}

// validateProvider checks the provider block and max_dph_total. The vast
// API key has no field (a strict decode refuses "api_key"): it stays in a
// file or the environment.
func validateProvider(c *wire.Config) error {
	if c.MaxDPHTotal < 0 {
		return fmt.Errorf("max_dph_total: must not be negative")
	}
	p := c.Provider
	if p == nil {
		return nil
	}
	if p.Kind == "" {
		return fmt.Errorf("provider.kind: missing; want %s", kindList())
	}
	if err := CheckProviderKind(p.Kind); err != nil {
		return fmt.Errorf("provider.kind: %w", err)
	}
	if p.PerIP < 0 {
		return fmt.Errorf("provider.per_ip: must not be negative")
	}
	if p.Kind != wire.ProviderDocker && (p.Hairpin || p.PerIP != 0) {
		return fmt.Errorf("provider: hairpin and per_ip shape the docker provider's local network, not %s's", p.Kind)
	}
	if p.Kind != wire.ProviderNone && p.PrivateNetwork {
		return fmt.Errorf("provider.private_network: kind %s's network is not yours to call private (vast's is the internet; docker's is local, its firewall off by default)", p.Kind)
	}
	if p.Kind != wire.ProviderVast {
		// Only vast rents by offer; a docker or none block with vast's
		// settings is a config mixed up, not something to ignore.
		if p.BaseURL != "" || p.APIKeyFile != "" || p.DiskGB != 0 || len(p.NodeTypes) > 0 || !p.OfferFilters.Empty() ||
			p.ReplaceBeforeEndS != nil || p.PriceIncreaseMaxDPH != 0 {
			return fmt.Errorf("provider: base_url, api_key_file, disk_gb, node_types, replace_before_end_s, price_increase_max_dph and offer filters are vast settings, not %s's", p.Kind)
		}
		if p.Kind == wire.ProviderNone && p.Image != "" {
			return fmt.Errorf("provider.image: kind none rents nothing")
		}
		return nil
	}
	if p.BaseURL != "" {
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("provider.base_url: %q: want an http(s) URL", p.BaseURL)
		}
	}
	if p.DiskGB < 0 {
		return fmt.Errorf("provider.disk_gb: must not be negative")
	}
	if err := p.OfferFilters.Check(); err != nil {
		return fmt.Errorf("provider.%w", err)
	}
	if r := p.ReplaceBeforeEndS; r != nil && (*r < 0 || *r > 30*24*3600) {
		return fmt.Errorf("provider.replace_before_end_s: %d, want 0-2592000 seconds (0: replace at the end date)", *r)
	}
	if m := p.PriceIncreaseMaxDPH; !(m >= 0 && m < 1000) {
		return fmt.Errorf("provider.price_increase_max_dph: %g, want 0 (reject every price increase) or a $/hour cap", m)
	}
	names := make([]string, 0, len(p.NodeTypes))
	for n := range p.NodeTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := p.NodeTypes[n]
		if _, ok := c.NodeTypes[n]; !ok {
			return fmt.Errorf("provider.node_types.%s: not a node type of node_types", n)
		}
		if o.MaxDPH < 0 || o.DiskGB < 0 {
			return fmt.Errorf("provider.node_types.%s: max_dph and disk_gb must not be negative", n)
		}
		if err := o.OfferFilters.Check(); err != nil {
			return fmt.Errorf("provider.node_types.%s.%w", n, err)
		}
		_, own := o.Search["gpu_name"]
		_, top := p.Search["gpu_name"]
		if o.GPUName != "" && (own || top) {
			return fmt.Errorf("provider.node_types.%s: gpu_name and search.gpu_name both set; keep one", n)
		}
		if b := o.Interruptible; b != nil {
			if err := b.Check(); err != nil {
				return fmt.Errorf("provider.node_types.%s.%w", n, err)
			}
			if o.MaxDPH != 0 {
				return fmt.Errorf("provider.node_types.%s: max_dph and interruptible both set; an interruptible type's cap is interruptible.max_bid_dph", n)
			}
			if c.MaxDPHTotal > 0 && b.MaxBidDPH > c.MaxDPHTotal {
				return fmt.Errorf("provider.node_types.%s.interruptible.max_bid_dph %.4g: above max_dph_total %.4g, no such bid could be afforded", n, b.MaxBidDPH, c.MaxDPHTotal)
			}
		}
		if c.MaxDPHTotal > 0 && o.MaxDPH > c.MaxDPHTotal {
			return fmt.Errorf("provider.node_types.%s.max_dph %.4g: above max_dph_total %.4g, no such rental could be afforded", n, o.MaxDPH, c.MaxDPHTotal)
		}
	}
	return nil
}
