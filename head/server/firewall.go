package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/guard"
	"github.com/rayvast/rayvast/head/statedir"
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

// openGuard opens the firewall when it is on (nil, nil when off, after
// warning of a table an earlier run left).
func openGuard(ctx context.Context, f Config, st *statedir.State, ports []int, rayPorts func() ([]int, error), log *slog.Logger) (*guard.Guard, error) {
	table := firewall.TableFor(st.AppID)
	if !f.FirewallOn() {
		guard.WarnLeftover(ctx, table, f.Nft, log)
		return nil, nil
	}
	return guard.Open(ctx, guard.Config{Table: table, Ports: ports, RayPorts: rayPorts, Nft: f.Nft, Log: log})
}
