package vastnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/internal/dockerengine"
)

// Labels of vast's network on a container (with LabelPublicIP).
const (
	LabelNet       = "rayvast.vastnet"    // the Net (its cluster): Sync finds its containers by it
	LabelPrivateIP = "rayvast.private_ip" // the container's own address
	LabelPorts     = "rayvast.ports"      // its ports: "20000-20063" (ranges, commas)
	LabelRole      = "rayvast.role"       // "public" on the network of public IPs
)

// The 64 ports of a candidate (inside = outside, forwarded from its public
// IP; the k-th candidate behind one IP has the k-th block after these). They sit below
// Linux's ephemeral range (32768–60999): the agent connects out (CA, DNS)
// before it listens on them, and an outgoing connection that happened to
// get one of them as its local port made that listen fail.
const (
	FirstPort = 20000
	NumPorts  = 64
)

// MaxPerIP bounds Options.PerIP: every share takes 64 ports below the
// ephemeral range.
const MaxPerIP = 16

// Options are the knobs of vast's network. The head reads them from the
// docker provider block of its config (these JSON names), where
// RAYVAST_DOCKER_HAIRPIN and RAYVAST_DOCKER_PER_IP win.
type Options struct {
	// Hairpin: a candidate connecting to its own public IP (or to that of
	// a candidate behind the same IP) reaches it, as behind a router that
	// loops traffic back. Off (the default: vast does not promise it), such
	// a connection is refused.
	Hairpin bool `json:"hairpin,omitempty"`
	// PerIP candidates share each public IP, each with its own 64 ports
	// (0 or 1: one candidate per IP; at most MaxPerIP).
	PerIP int `json:"per_ip,omitempty"`
}

// Config builds a Net.
type Config struct {
	Engine  *dockerengine.Client // default: /var/run/docker.sock
	Cluster string               // names the networks and the table, labels everything
	HeadIP  string               // as EnsureNetworkFor
	Options Options
	// Nft runs an nft script (nft -f -); default the nft binary on PATH.
	Nft func(ctx context.Context, script string) error
	// Root is where /proc and /sys are (default "/"): hairpin mode is set
	// on the host side of a container's link.
	Root string
	Log  *slog.Logger
}

// Net is vast's network for one cluster on this machine: candidates on
// Private (the head listens on its gateway), "public" IPs drawn from the
// subnet of Public, a network no container joins, so this machine routes
// those addresses to a bridge of its own and nothing leaves it, and the NAT
// between them in the nftables table TableName(cluster).
type Net struct {
	Private Network
	Public  Network
	cfg     Config
}

// Endpoint is one candidate's place in the network.
type Endpoint struct {
	Container string // ID, when listed
	Private   netip.Addr
	Public    netip.Addr
	Ports     []int
}

// PublicNetworkName is the network the public IPs are drawn from.
func PublicNetworkName(cluster string) string { return NetworkName(cluster) + "-pub" }

// Open ensures both networks and writes the table for the
// containers already there (a restarted head's). privCreated reports
// whether this call made the private network.
func Open(ctx context.Context, cfg Config) (v *Net, privCreated bool, err error) {
	if cfg.Engine == nil {
		cfg.Engine = dockerengine.New("")
	}
	if cfg.Nft == nil {
		cfg.Nft = firewall.RunNft("nft")
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Options.PerIP == 0 {
		cfg.Options.PerIP = 1
	}
	if cfg.Options.PerIP < 1 || cfg.Options.PerIP > MaxPerIP {
		return nil, false, fmt.Errorf("vast network: per_ip %d: want 1 to %d", cfg.Options.PerIP, MaxPerIP)
	}
	v = &Net{cfg: cfg}
	if v.Private, privCreated, err = EnsureNetworkFor(ctx, cfg.Engine, cfg.Cluster, cfg.HeadIP); err != nil {
		return nil, false, err
	}
	if v.Public, _, err = ensureNetwork(ctx, cfg.Engine, PublicNetworkName(cfg.Cluster), cfg.Cluster, netip.Addr{}); err != nil {
		return nil, privCreated, err
	}
	if err := v.Sync(ctx); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			err = fmt.Errorf("vast network %s: the docker provider needs nft for its NAT (apt-get install nftables): %w", cfg.Cluster, exec.ErrNotFound)
		}
		return nil, privCreated, err
	}
	return v, privCreated, nil
}

// Options are the knobs in force.
func (v *Net) Options() Options { return v.cfg.Options }

// Endpoints lists the endpoints of every container of this network (stopped
// ones too: they keep their addresses).
func (v *Net) Endpoints(ctx context.Context) ([]Endpoint, error) {
	cs, err := v.cfg.Engine.ListContainers(ctx, LabelNet+"="+v.cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("vast network %s: %w", v.cfg.Cluster, err)
	}
	var out []Endpoint
	for _, c := range cs {
		if c.Labels[LabelNet] != v.cfg.Cluster {
			continue
		}
		if e, ok := EndpointFrom(c.Labels); ok {
			e.Container = c.ID
			out = append(out, e)
		}
	}
	return out, nil
}

// EndpointFrom reads an endpoint from a container's labels.
func EndpointFrom(labels map[string]string) (Endpoint, bool) {
	priv, err1 := netip.ParseAddr(labels[LabelPrivateIP])
	pub, err2 := netip.ParseAddr(labels[LabelPublicIP])
	ports, err3 := parsePorts(labels[LabelPorts])
	e := Endpoint{Private: priv, Public: pub, Ports: ports}
	return e, err1 == nil && err2 == nil && err3 == nil && validEndpoint(e)
}

// Labels are the labels a container of e carries (merge them into its own).
func (v *Net) Labels(e Endpoint) map[string]string {
	return map[string]string{
		LabelNet: v.cfg.Cluster, LabelPrivateIP: e.Private.String(),
		LabelPublicIP: e.Public.String(), LabelPorts: FormatPorts(e.Ports),
	}
}

// Networking attaches a container to the private network at e's address.
func (v *Net) Networking(e Endpoint) *dockerengine.NetworkingConfig {
	return &dockerengine.NetworkingConfig{EndpointsConfig: map[string]dockerengine.EndpointSettings{
		v.Private.Name: {IPAMConfig: &dockerengine.EndpointIPAM{IPv4Address: e.Private.String()}},
	}}
}

// Place picks a free private address and a public IP with room. ports nil:
// the next free block of SlotPorts on that IP; else exactly these ports
// (an IP whose other candidates hold none of them). The caller creates the
// container with Labels and Networking, calls Sync (before the start: the
// container's first connection must already leave by its public IP), starts
// it and calls Started; one lock around Place … Sync.
func (v *Net) Place(ctx context.Context, ports []int) (Endpoint, error) {
	eps, err := v.Endpoints(ctx)
	if err != nil {
		return Endpoint{}, err
	}
	priv, err := v.freePrivate(ctx, eps)
	if err != nil {
		return Endpoint{}, err
	}
	byIP := map[netip.Addr][]Endpoint{}
	for _, e := range eps {
		byIP[e.Public] = append(byIP[e.Public], e)
	}
	for a := range hosts(v.Public) {
		occ := byIP[a]
		if len(occ) >= v.cfg.Options.PerIP {
			continue
		}
		ps := ports
		if ps == nil {
			ps = freeSlot(occ, v.cfg.Options.PerIP)
		}
		if ps != nil && !overlaps(occ, ps) {
			return Endpoint{Private: priv, Public: a, Ports: ps}, nil
		}
	}
	return Endpoint{}, fmt.Errorf("vast network %s: no public IP with room in %s", v.cfg.Cluster, v.Public.Subnet)
}

func (v *Net) freePrivate(ctx context.Context, eps []Endpoint) (netip.Addr, error) {
	used := map[netip.Addr]bool{v.Private.Gateway: true}
	for _, e := range eps {
		used[e.Private] = true
	}
	info, err := v.cfg.Engine.InspectNetwork(ctx, v.Private.ID)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("vast network %s: %w", v.cfg.Cluster, err)
	}
	for _, c := range info.Containers {
		if pf, err := netip.ParsePrefix(c.IPv4Address); err == nil {
			used[pf.Addr()] = true
		}
	}
	for a := range hosts(v.Private) {
		if !used[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("vast network %s: no free address in %s", v.cfg.Cluster, v.Private.Subnet)
}

// hosts yields a network's addresses but its own, the gateway and the
// broadcast address.
func hosts(n Network) func(yield func(netip.Addr) bool) {
	return func(yield func(netip.Addr) bool) {
		for a := n.Subnet.Addr().Next(); n.Subnet.Contains(a.Next()); a = a.Next() {
			if a != n.Gateway && !yield(a) {
				return
			}
		}
	}
}

// SlotPorts are the 64 ports of the slot-th candidate behind one IP.
func SlotPorts(slot int) []int {
	ps := make([]int, NumPorts)
	for i := range ps {
		ps[i] = FirstPort + slot*NumPorts + i
	}
	return ps
}

func freeSlot(occ []Endpoint, perIP int) []int {
	for k := 0; k < perIP; k++ {
		if ps := SlotPorts(k); !overlaps(occ, ps) {
			return ps
		}
	}
	return nil
}

func overlaps(occ []Endpoint, ports []int) bool {
	want := map[int]bool{}
	for _, p := range ports {
		want[p] = true
	}
	for _, e := range occ {
		for _, p := range e.Ports {
			if want[p] {
				return true
			}
		}
	}
	return false
}

// Started finishes a container's place once it runs: hairpin mode on its
// link when hairpin is on (the link exists only from the start).
func (v *Net) Started(ctx context.Context, containerID string) error {
	if !v.cfg.Options.Hairpin {
		return nil
	}
	return v.setHairpin(ctx, containerID)
}

// Sync rewrites the table for the containers there are now (after a
// container is removed, or on a restart).
func (v *Net) Sync(ctx context.Context) error {
	eps, err := v.Endpoints(ctx)
	if err != nil {
		return err
	}
	if err := v.cfg.Nft(ctx, natRules(TableName(v.cfg.Cluster), v.Public, eps, v.cfg.Options.Hairpin)); err != nil {
		return fmt.Errorf("vast network %s: nat table ip %s: %w", v.cfg.Cluster, TableName(v.cfg.Cluster), err)
	}
	return nil
}

// Close removes the table and the public network once no container of the
// network is left; a restarted head needs them otherwise.
func (v *Net) Close(ctx context.Context) error {
	eps, err := v.Endpoints(ctx)
	if err != nil || len(eps) > 0 {
		return err
	}
	err = RemoveTable(ctx, v.cfg.Nft, v.cfg.Cluster)
	if rmErr := v.cfg.Engine.RemoveNetwork(ctx, v.Public.ID); rmErr != nil && !errors.Is(rmErr, dockerengine.ErrNotFound) && err == nil {
		err = rmErr
	}
	return err
}

// setHairpin turns on hairpin mode on the host end of the container's
// eth0: with Docker's br_netfilter, a frame translated back to the port it
// came in on is bridged there, and a bridge drops that unless the port is
// in hairpin mode (what Docker itself does without its userland proxy).
func (v *Net) setHairpin(ctx context.Context, id string) error {
	info, err := v.cfg.Engine.InspectContainer(ctx, id)
	if err != nil {
		return fmt.Errorf("hairpin %s: %w", id, err)
	}
	if !info.State.Running || info.State.Pid <= 0 {
		v.cfg.Log.Warn("vast network: container not running; no hairpin mode to set", "container", id)
		return nil
	}
	proc := filepath.Join(v.cfg.Root, "proc", strconv.Itoa(info.State.Pid), "root/sys/class/net/eth0/iflink")
	b, err := os.ReadFile(proc)
	if err != nil {
		return fmt.Errorf("hairpin %s: %w", id, err)
	}
	peer := strings.TrimSpace(string(b))
	sys := filepath.Join(v.cfg.Root, "sys/class/net")
	links, err := os.ReadDir(sys)
	if err != nil {
		return fmt.Errorf("hairpin %s: %w", id, err)
	}
	for _, l := range links {
		if idx, err := os.ReadFile(filepath.Join(sys, l.Name(), "ifindex")); err == nil && strings.TrimSpace(string(idx)) == peer {
			if err := os.WriteFile(filepath.Join(sys, l.Name(), "brport/hairpin_mode"), []byte("1\n"), 0o644); err != nil {
				return fmt.Errorf("hairpin %s: %w", id, err)
			}
			return nil
		}
	}
	return fmt.Errorf("hairpin %s: no host link with ifindex %s", id, peer)
}

// FormatPorts writes runs as ranges: "20000-20063".
func FormatPorts(ps []int) string {
	s := append([]int(nil), ps...)
	sort.Ints(s)
	var out []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if i == j {
			out = append(out, strconv.Itoa(s[i]))
		} else {
			out = append(out, strconv.Itoa(s[i])+"-"+strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return strings.Join(out, ",")
}

func parsePorts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("ports %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 65535 {
				return nil, fmt.Errorf("ports %q: bad range %q", s, f)
			}
		}
		for p := a; p <= b; p++ {
			out = append(out, p)
		}
	}
	return out, nil
}
