package vastnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"

	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/internal/dockerengine"
)

// Labels on everything of a cluster's vast network (its networks and
// containers): Cleanup finds them by LabelCluster.
const (
	LabelCluster  = "rayvast.cluster"
	LabelPublicIP = "rayvast.public_ip"
)

// Network is the cluster's bridge network.
type Network struct {
	ID      string
	Name    string
	Subnet  netip.Prefix
	Gateway netip.Addr // the head listens here
}

// NetworkName is the cluster's network name.
func NetworkName(cluster string) string {
	return "rayvast-" + dockerengine.SafeName(cluster)
}

// EnsureNetwork returns the cluster's network, creating it if needed. It is
// a bridge with an explicit subnet (Docker gives fixed container addresses
// only on such networks). The subnet is one Docker itself picks as free: a
// probe network is created without one, read, removed, and the real network
// is created with that subnet. created reports whether this call made it.
func EnsureNetwork(ctx context.Context, eng *dockerengine.Client, cluster string) (n Network, created bool, err error) {
	return ensureNetwork(ctx, eng, NetworkName(cluster), cluster, netip.Addr{})
}

// EnsureNetworkFor is EnsureNetwork for a head whose IP is already chosen
// (`head init --ip`): when the network is new and headIP is a private IPv4
// address no local interface has, the network is made around it (its /24,
// headIP as the gateway), so `head init --ip 10.77.0.1` then `head serve
// --provider docker` works with no other step. Otherwise Docker picks.
func EnsureNetworkFor(ctx context.Context, eng *dockerengine.Client, cluster, headIP string) (Network, bool, error) {
	ip, err := netip.ParseAddr(headIP)
	if err != nil || !ip.Is4() || !ip.IsPrivate() || isLocalAddr(ip) {
		ip = netip.Addr{}
	}
	return ensureNetwork(ctx, eng, NetworkName(cluster), cluster, ip)
}

func isLocalAddr(ip netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: let Docker pick
	}
	for _, a := range addrs {
		if pn, ok := a.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(pn.IP); ok && x.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

func ensureNetwork(ctx context.Context, eng *dockerengine.Client, name, cluster string, gateway netip.Addr) (n Network, created bool, err error) {
	info, err := eng.InspectNetwork(ctx, name)
	if err == nil {
		if info.Labels[LabelCluster] != cluster {
			return n, false, fmt.Errorf("network %s exists but is not cluster %q's (label %s=%q)", name, cluster, LabelCluster, info.Labels[LabelCluster])
		}
		n, err = networkFrom(info)
		return n, false, err
	}
	if !errors.Is(err, dockerengine.ErrNotFound) {
		return n, false, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		var subnet, gw string
		if gateway.IsValid() {
			pfx, _ := gateway.Prefix(24)
			subnet, gw = pfx.String(), gateway.String()
			attempt = 3 // a fixed choice: no point retrying
		} else if subnet, gw, err = probeSubnet(ctx, eng, name+"-probe", cluster); err != nil {
			return n, false, err
		}
		_, err = eng.CreateNetwork(ctx, dockerengine.NetworkConfig{
			Name: name, CheckDuplicate: true,
			IPAM:   &dockerengine.IPAM{Config: []dockerengine.IPAMConfig{{Subnet: subnet, Gateway: gw}}},
			Labels: map[string]string{LabelCluster: cluster},
		})
		if err == nil {
			info, err := eng.InspectNetwork(ctx, name)
			if err != nil {
				return n, true, err
			}
			n, err = networkFrom(info)
			return n, true, err
		}
		lastErr = err // another network took the subnet meanwhile: probe again
	}
	return n, false, fmt.Errorf("create network %s: %w", name, lastErr)
}

// probeSubnet lets Docker pick a free subnet for a throwaway network.
func probeSubnet(ctx context.Context, eng *dockerengine.Client, name, cluster string) (subnet, gw string, err error) {
	_ = eng.RemoveNetwork(ctx, name) // a leftover of a crashed run
	id, err := eng.CreateNetwork(ctx, dockerengine.NetworkConfig{Name: name, CheckDuplicate: true, Labels: map[string]string{LabelCluster: cluster}})
	if err != nil {
		return "", "", fmt.Errorf("probe subnet: %w", err)
	}
	info, err := eng.InspectNetwork(ctx, id)
	if rmErr := eng.RemoveNetwork(ctx, id); err == nil && rmErr != nil {
		err = rmErr
	}
	if err != nil {
		return "", "", fmt.Errorf("probe subnet: %w", err)
	}
	if len(info.IPAM.Config) == 0 || info.IPAM.Config[0].Subnet == "" {
		return "", "", fmt.Errorf("probe subnet: Docker gave network %s no subnet", name)
	}
	return info.IPAM.Config[0].Subnet, info.IPAM.Config[0].Gateway, nil
}

func networkFrom(info dockerengine.NetworkInfo) (Network, error) {
	n := Network{ID: info.ID, Name: info.Name}
	for _, c := range info.IPAM.Config {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		n.Subnet = p.Masked()
		if gw, err := netip.ParseAddr(c.Gateway); err == nil {
			n.Gateway = gw
		} else {
			n.Gateway = n.Subnet.Addr().Next()
		}
		return n, nil
	}
	return n, fmt.Errorf("network %s has no IPv4 subnet of its own", info.Name)
}

// Cleanup removes every container, network and NAT table of the clusters
// that match selects (nil: every rayvast cluster), found by their labels.
// It keeps going past errors and returns the first.
func Cleanup(ctx context.Context, eng *dockerengine.Client, match func(cluster string) bool) error {
	return cleanup(ctx, eng, firewall.RunNft("nft"), match)
}

func cleanup(ctx context.Context, eng *dockerengine.Client, nft func(context.Context, string) error, match func(cluster string) bool) error {
	var first error
	note := func(err error) {
		if err != nil && !errors.Is(err, dockerengine.ErrNotFound) && first == nil {
			first = err
		}
	}
	clusters := map[string]bool{}
	cs, err := eng.ListContainers(ctx, LabelCluster)
	note(err)
	for _, c := range cs {
		if cl := c.Labels[LabelCluster]; match == nil || match(cl) {
			clusters[cl] = true
			note(eng.RemoveContainer(ctx, c.ID, true))
		}
	}
	ns, err := eng.ListNetworks(ctx, LabelCluster)
	note(err)
	for _, n := range ns {
		if cl := n.Labels[LabelCluster]; match == nil || match(cl) {
			clusters[cl] = true
			note(eng.RemoveNetwork(ctx, n.ID))
		}
	}
	// The tables go last: while a container is left, its ports must not
	// fall through to the default route.
	for cl := range clusters {
		if err := RemoveTable(ctx, nft, cl); !errors.Is(err, exec.ErrNotFound) { // no nft: no table
			note(err)
		}
	}
	return first
}
