package server

import (
	"context"
	"fmt"
	"time"

	"github.com/rayvast/rayvast/head/firewall"
)

// FirewallOn is whether serve guards its ports: --firewall on, or auto
// where the provider kind's rentals are on a network others reach (the
// kinds table: vast, and none unless the config says its network is
// private; the docker provider's local network stays open).
func (f Config) FirewallOn() bool {
	if f.Firewall != "auto" {
		return f.Firewall == "on"
	}
	k, ok := kinds[f.Provider]
	return ok && k.firewall(f.PrivateNetwork) // an unknown kind is refused before anything serves
}

// CheckFirewall refuses a --firewall that cannot be honoured, before
// anything starts: a value other than on, off or auto, or a firewall that
// is on while nftables cannot be driven here (no nft, no CAP_NET_ADMIN).
// nft runs nft scripts (nil: the nft binary).
func (f Config) CheckFirewall(ctx context.Context) error {
	nft := f.Nft
	switch f.Firewall {
	case "on", "off", "auto":
	default:
		return fmt.Errorf("--firewall %q: want on, off or auto", f.Firewall)
	}
	if !f.FirewallOn() {
		return nil
	}
	if nft == nil {
		nft = firewall.RunNft("nft")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := nft(ctx, "list tables\n"); err != nil {
		return fmt.Errorf("--firewall %s (provider %s): nftables cannot be used here, so ports A and B and the Ray head's ports would be open to anyone: %v", f.Firewall, f.Provider, err)
	}
	return nil
}
