package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/whoami"
	"github.com/rayvast/rayvast/internal/wire"
)

// Environment variables the head reads the Settings from
// (head/provider_settings.go; they win over the config's provider block).
// Named here so tools that start a head (head demo, the e2e suite) set them.
const (
	EnvImage           = "RAYVAST_DOCKER_IMAGE"             // Settings.Image
	EnvUnsafeNodeTypes = "RAYVAST_DOCKER_UNSAFE_NODE_TYPES" // Settings.UnsafeNodeTypes, a comma list
	EnvMemoryMB        = "RAYVAST_DOCKER_MEMORY_MB"         // Settings.MemoryBytes in MiB
	EnvHairpin         = "RAYVAST_DOCKER_HAIRPIN"           // "1": Settings.Net.Hairpin
	EnvPerIP           = "RAYVAST_DOCKER_PER_IP"            // Settings.Net.PerIP
)

// Labels on a candidate's container (with vastnet's LabelCluster and
// LabelPublicIP): a restarted head maps them back to its candidates.
const (
	LabelCandidate = "rayvast.candidate"
	LabelNodeType  = "rayvast.node_type"
	LabelHostID    = "rayvast.host_id"
	LabelUnsafe    = "rayvast.unsafe"
)

// ShmSize is the private /dev/shm of each candidate.
const ShmSize = 64 << 20

// DefaultPidsLimit bounds the processes of one candidate: Ray starts a few
// dozen per node; thousands are a fork bomb.
const DefaultPidsLimit = 4096

// stateFile keeps the DNS responder's port across head restarts: a
// candidate's env names it, and env is fixed at create time.
const stateFile = "docker-provider.json"

// Settings are what a user chooses of the provider.
type Settings struct {
	// Image is the candidates' image (required): the head builds one with
	// head/candidateimage when none is set.
	Image string
	// UnsafeNodeTypes are rented with NET_RAW kept, like RentRequest.Unsafe
	// (`head demo`'s refusal).
	UnsafeNodeTypes []string
	// MemoryBytes bounds each candidate's memory (0 = no limit: Ray sizes
	// its object store from what it sees).
	MemoryBytes int64
	// Net are the knobs of vast's network (hairpin, candidates per IP).
	Net vastnet.Options
}

// Config builds a Provider: the Settings and where it runs.
type Config struct {
	Settings
	Engine   *dockerengine.Client // default: /var/run/docker.sock
	Cluster  string
	StateDir string // "" keeps nothing across restarts
	HeadIP   string // informational: warns when not the gateway
	// PidsLimit bounds each candidate's processes (default
	// DefaultPidsLimit; -1 = no limit): a candidate's image is not trusted
	// to leave the head's machine able to fork.
	PidsLimit int64
	// Nft runs nft scripts (default the nft binary on PATH).
	Nft func(ctx context.Context, script string) error
	Log *slog.Logger
}

// Provider rents containers on the local Docker Engine.
type Provider struct {
	cfg        Config
	eng        *dockerengine.Client
	net        vastnet.Network // vnet.Private
	vnet       *vastnet.Net
	netCreated bool
	dns        *whoami.Server
	resolvers  string
	log        *slog.Logger

	mu sync.Mutex // serialises address allocation with create
}

var _ provider.Provider = (*Provider)(nil)

// New checks the Engine and the image, ensures the cluster's vast network
// and starts the who-am-I responder on its gateway. It builds no image.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Engine == nil {
		cfg.Engine = dockerengine.New("")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Cluster == "" {
		return nil, errors.New("docker provider: no cluster name")
	}
	if cfg.Image == "" {
		return nil, errors.New("docker provider: no image")
	}
	if cfg.PidsLimit == 0 {
		cfg.PidsLimit = DefaultPidsLimit
	}
	if _, err := cfg.Engine.Version(ctx); err != nil {
		return nil, fmt.Errorf("docker provider: is Docker running and are you root? %w", err)
	}
	if _, err := cfg.Engine.InspectImage(ctx, cfg.Image); err != nil {
		return nil, fmt.Errorf("docker provider: image %s: %w", cfg.Image, err)
	}
	vnet, created, err := vastnet.Open(ctx, vastnet.Config{Engine: cfg.Engine, Cluster: cfg.Cluster, HeadIP: cfg.HeadIP, Options: cfg.Net, Nft: cfg.Nft, Log: cfg.Log})
	if err != nil {
		return nil, fmt.Errorf("docker provider: %w", err)
	}
	n := vnet.Private
	p := &Provider{cfg: cfg, eng: cfg.Engine, net: n, vnet: vnet, netCreated: created, log: cfg.Log}
	if cfg.HeadIP != "" && cfg.HeadIP != n.Gateway.String() {
		p.log.Warn("docker provider: head IP is not the network's gateway; candidates must be able to reach it", "head_ip", cfg.HeadIP, "gateway", n.Gateway.String(), "network", n.Name)
	}
	if err := p.startDNS(); err != nil {
		p.Close()
		return nil, err
	}
	p.log.Info("docker provider ready", "network", n.Name, "subnet", n.Subnet.String(), "gateway", n.Gateway.String(),
		"public_subnet", vnet.Public.Subnet.String(), "nat_table", "ip "+vastnet.TableName(cfg.Cluster), "hairpin", vnet.Options().Hairpin, "per_ip", vnet.Options().PerIP,
		"image", cfg.Image, "dns", p.dns.Addr())
	return p, nil
}

// Network is the cluster's bridge network, where the candidates' own
// addresses are and the head listens on the gateway.
func (p *Provider) Network() vastnet.Network { return p.net }

// VastNet is the cluster's vast network (its public IPs, its NAT).
func (p *Provider) VastNet() *vastnet.Net { return p.vnet }

// DNSAddr is the who-am-I responder's ip:port.
func (p *Provider) DNSAddr() string { return p.dns.Addr() }

// startDNS listens on the gateway, on the port a previous run used if any.
func (p *Provider) startDNS() error {
	var st struct {
		DNSPort int `json:"dns_port"`
	}
	path := ""
	if p.cfg.StateDir != "" {
		path = filepath.Join(p.cfg.StateDir, stateFile)
		if b, err := os.ReadFile(path); err == nil {
			_ = json.Unmarshal(b, &st)
		}
	}
	gw := p.net.Gateway.String()
	var err error
	if st.DNSPort != 0 {
		p.dns, err = whoami.Start(net.JoinHostPort(gw, strconv.Itoa(st.DNSPort)), nil, p.log)
		if err != nil {
			p.log.Warn("docker provider: DNS port of the last run is taken; candidates rented before fail their egress check", "port", st.DNSPort, "err", err)
		}
	}
	if p.dns == nil {
		if p.dns, err = whoami.Start(net.JoinHostPort(gw, "0"), nil, p.log); err != nil {
			return fmt.Errorf("docker provider: who-am-I DNS on %s: %w", gw, err)
		}
	}
	_, port, _ := net.SplitHostPort(p.dns.Addr())
	st.DNSPort, _ = strconv.Atoi(port)
	if path != "" {
		b, _ := json.Marshal(st)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			p.log.Warn("docker provider: cannot keep the DNS port", "path", path, "err", err)
		}
	}
	a := p.dns.Addr()
	p.resolvers = "opendns@" + a + ",google@" + a + ",cloudflare@" + a
	return nil
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return wire.ProviderDocker }

// InstanceName is the container name (and instance ID, and host ID) of a
// candidate: 1–64 of [A-Za-z0-9._-].
func InstanceName(cluster, candidateID string) string {
	s := "rv-" + dockerengine.SafeName(cluster) + "-" + dockerengine.SafeName(candidateID)
	if len(s) > 64 {
		h := sha256.Sum256([]byte(cluster + "\x00" + candidateID))
		s = "rv-" + hex.EncodeToString(h[:12])
	}
	return s
}

// Ports is RAYVAST_PORTS of the first (or only) candidate behind an IP.
func Ports() []int { return vastnet.SlotPorts(0) }

func portsEnv(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// Rent implements provider.Provider: create and start one container.
func (p *Provider) Rent(ctx context.Context, req provider.RentRequest) (provider.Rental, error) {
	if req.Command == "" {
		return provider.Rental{}, errors.New("docker rent: no command (bootloader.sh text)")
	}
	unsafe := req.Unsafe
	for _, t := range p.cfg.UnsafeNodeTypes {
		unsafe = unsafe || t == req.NodeType
	}
	name := InstanceName(p.cfg.Cluster, req.CandidateID)

	p.mu.Lock()
	defer p.mu.Unlock()
	ep, err := p.vnet.Place(ctx, nil)
	if err != nil {
		return provider.Rental{}, fmt.Errorf("docker rent %s: %w", name, err)
	}
	ip := ep.Public
	env := map[string]string{}
	for k, v := range req.Env {
		env[k] = v
	}
	env[wire.EnvInstanceID] = name
	env[wire.EnvPublicIP] = ip.String()
	env[wire.EnvPorts] = portsEnv(ep.Ports)
	env[wire.EnvEgressResolvers] = p.resolvers
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)

	hc := dockerengine.HostConfig{
		NetworkMode: p.net.Name,
		CapDrop:     []string{"NET_RAW", "NET_ADMIN"},
		IpcMode:     "private", // its own, empty /dev/shm
		ShmSize:     ShmSize,
		Memory:      p.cfg.MemoryBytes,
	}
	if p.cfg.PidsLimit > 0 {
		hc.PidsLimit = &p.cfg.PidsLimit
	}
	if unsafe {
		hc.CapDrop = []string{"NET_ADMIN"}
		hc.CapAdd = []string{"NET_RAW"}
	}
	cfg := dockerengine.ContainerConfig{
		Image:      p.cfg.Image,
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{req.Command},
		Env:        envList,
		Hostname:   name,
		Labels: map[string]string{
			vastnet.LabelCluster: p.cfg.Cluster, LabelCandidate: req.CandidateID, LabelNodeType: req.NodeType,
			LabelHostID: name, LabelUnsafe: strconv.FormatBool(unsafe),
		},
		HostConfig:       hc,
		NetworkingConfig: p.vnet.Networking(ep),
	}
	for k, v := range p.vnet.Labels(ep) {
		cfg.Labels[k] = v
	}
	id, err := p.eng.CreateContainer(ctx, name, cfg)
	var apiErr *dockerengine.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict {
		// Rented before (a head that restarted mid-Rent): the same
		// candidate's container is this rental.
		if info, ierr := p.eng.InspectContainer(ctx, name); ierr == nil &&
			info.Config.Labels[vastnet.LabelCluster] == p.cfg.Cluster && info.Config.Labels[LabelCandidate] == req.CandidateID {
			p.log.Info("docker rent: container exists already", "instance", name)
			return rentalFrom(name, info.Config.Labels, info.State.Running), nil
		}
	}
	if err != nil {
		return provider.Rental{}, fmt.Errorf("docker rent %s: %w", name, err)
	}
	if err = p.vnet.Sync(ctx); err == nil { // its ports and its source IP from its first packet on
		if err = p.eng.StartContainer(ctx, id); err == nil {
			err = p.vnet.Started(ctx, id)
		}
	}
	if err != nil {
		_ = p.eng.RemoveContainer(context.WithoutCancel(ctx), id, true)
		_ = p.vnet.Sync(context.WithoutCancel(ctx))
		return provider.Rental{}, fmt.Errorf("docker rent %s: %w", name, err)
	}
	p.log.Info("docker rented", "instance", name, "candidate", req.CandidateID, "public_ip", ip.String(), "ports", vastnet.FormatPorts(ep.Ports), "private_ip", ep.Private.String(), "unsafe", unsafe)
	return provider.Rental{CandidateID: req.CandidateID, InstanceID: name, HostID: name, PublicIP: ip.String(), Running: true}, nil
}

// Get implements provider.Provider.
func (p *Provider) Get(ctx context.Context, instanceID string) (provider.Rental, error) {
	info, err := p.eng.InspectContainer(ctx, instanceID)
	if errors.Is(err, dockerengine.ErrNotFound) {
		return provider.Rental{}, provider.ErrGone
	}
	if err != nil {
		return provider.Rental{}, fmt.Errorf("docker get %s: %w", instanceID, err)
	}
	if info.Config.Labels[vastnet.LabelCluster] != p.cfg.Cluster {
		return provider.Rental{}, provider.ErrGone // not ours
	}
	return rentalFrom(strings.TrimPrefix(info.Name, "/"), info.Config.Labels, info.State.Running), nil
}

func rentalFrom(name string, labels map[string]string, running bool) provider.Rental {
	return provider.Rental{
		CandidateID: labels[LabelCandidate], InstanceID: name, HostID: labels[LabelHostID],
		PublicIP: labels[vastnet.LabelPublicIP], Running: running,
	}
}

// Destroy implements provider.Provider: remove the container (like ending a
// vast rental: no grace).
func (p *Provider) Destroy(ctx context.Context, instanceID string) error {
	if err := p.rentals().Destroy(ctx, instanceID); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.vnet.Sync(ctx) // its public IP:ports lead nowhere now
}

// List implements provider.Provider: every container labelled with the
// cluster, stopped ones too.
func (p *Provider) List(ctx context.Context) ([]provider.Rental, error) {
	return p.rentals().List(ctx)
}

func (p *Provider) rentals() *Rentals {
	return &Rentals{eng: p.eng, cluster: p.cfg.Cluster, log: p.log}
}

// Close stops the DNS responder; once no container is left it removes the
// NAT table and the public network, and the network if this provider
// created it (a restarted head needs them all otherwise).
func (p *Provider) Close() error {
	if p.dns != nil {
		_ = p.dns.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p.vnet != nil {
		if err := p.vnet.Close(ctx); err != nil {
			p.log.Warn("docker provider: vast network left behind", "err", err)
		}
	}
	if p.netCreated {
		if cs, err := p.eng.ListContainers(ctx, vastnet.LabelCluster+"="+p.cfg.Cluster); err == nil && len(cs) == 0 {
			_ = p.eng.RemoveNetwork(ctx, p.net.ID)
		}
	}
	return nil
}
