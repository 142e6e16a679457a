package fakevast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/whoami"
	"github.com/rayvast/rayvast/internal/wire"
)

// Labels on the fake's containers.
const (
	LabelServer   = "fakevast.server"   // the fake's name: Cleanup finds them by it
	LabelInstance = "fakevast.instance" // vast instance ID
	LabelIP       = "fakevast.ip"       // the address the fake gave it
)

// DockerConfig builds a Docker backend.
type DockerConfig struct {
	Engine *dockerengine.Client // default /var/run/docker.sock
	Name   string               // labels containers and names the network rayvast-fakevast-<name>
	// Image runs every rental whose requested image is not on this machine
	// (there is no registry here). Required.
	Image string
	// Net is vast's network (vastnet.Net): hairpin, rentals per IP.
	Net vastnet.Options
	Log *slog.Logger
}

// Docker runs each rental as a container on a bridge network of its own,
// shaped like a vast instance: the env and command it was given, vast's own
// variables (CONTAINER_ID, PUBLIC_IPADDR, VAST_TCP_PORT_70000…, GPU_COUNT,
// CONTAINER_API_KEY), NET_RAW and NET_ADMIN dropped (unless the offer is
// Unsafe), a private /dev/shm. Its network is vast's (vastnet.Net): a
// public IP on none of its interfaces, the 64 ports forwarded from it
// (inside = outside), the head on the gateway seeing every connection of
// the rental from that IP.
type Docker struct {
	cfg     DockerConfig
	eng     *dockerengine.Client
	vnet    *vastnet.Net
	net     vastnet.Network
	created bool
	dns     *whoami.Server
	log     *slog.Logger

	mu     sync.Mutex // serialises address allocation with create
	exited exits
}

// OpenDocker ensures the network and starts a who-am-I DNS responder on its
// gateway (the stand-in for the internet's public resolvers of the egress
// check: containers get RAYVAST_EGRESS_RESOLVERS naming it).
func OpenDocker(ctx context.Context, cfg DockerConfig) (*Docker, error) {
	if cfg.Engine == nil {
		cfg.Engine = dockerengine.New("")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Name == "" {
		cfg.Name = "fakevast"
	}
	if cfg.Image == "" {
		return nil, errors.New("fakevast docker: no image")
	}
	if _, err := cfg.Engine.InspectImage(ctx, cfg.Image); err != nil {
		return nil, fmt.Errorf("fakevast docker: image %s: %w", cfg.Image, err)
	}
	vnet, created, err := vastnet.Open(ctx, vastnet.Config{Engine: cfg.Engine, Cluster: "fakevast-" + cfg.Name, Options: cfg.Net, Log: cfg.Log})
	if err != nil {
		return nil, fmt.Errorf("fakevast docker: %w", err)
	}
	n := vnet.Private
	d := &Docker{cfg: cfg, eng: cfg.Engine, vnet: vnet, net: n, created: created, log: cfg.Log}
	if d.dns, err = whoami.Start(net.JoinHostPort(n.Gateway.String(), "0"), nil, cfg.Log); err != nil {
		d.Close()
		return nil, fmt.Errorf("fakevast docker: who-am-I DNS: %w", err)
	}
	return d, nil
}

// Gateway is the head's address as the rentals reach it (`head init --ip`).
func (d *Docker) Gateway() netip.Addr { return d.net.Gateway }

// NetworkName is the bridge network's name.
func (d *Docker) NetworkName() string { return d.net.Name }

// Resolvers is the RAYVAST_EGRESS_RESOLVERS value given to every rental.
func (d *Docker) Resolvers() string {
	a := d.dns.Addr()
	return "opendns@" + a + ",google@" + a + ",cloudflare@" + a
}

func (d *Docker) name(id int64) string {
	return "fakevast-" + d.cfg.Name + "-" + strconv.FormatInt(id, 10)
}

// Start implements Backend.
func (d *Docker) Start(ctx context.Context, l Launch) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ep, err := d.vnet.Place(ctx, l.Ports)
	if err != nil {
		return "", err
	}
	ip := ep.Public
	env := map[string]string{}
	for k, v := range l.Env {
		env[k] = v
	}
	env[wire.EnvVastContainerID] = strconv.FormatInt(l.ID, 10)
	env[wire.EnvVastPublicIP] = ip.String()
	env[wire.EnvVastGPUCount] = strconv.Itoa(l.GPUs)
	env[wire.EnvVastAPIKey] = l.APIKey
	for i, p := range l.Ports {
		env[wire.EnvVastPortPrefix+strconv.Itoa(wire.VastPortBase+i)] = strconv.Itoa(p)
	}
	if _, set := env[wire.EnvEgressResolvers]; !set {
		env[wire.EnvEgressResolvers] = d.Resolvers()
	}
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	sort.Strings(list)
	image := l.Image
	if _, err := d.eng.InspectImage(ctx, image); err != nil {
		image = d.cfg.Image
	}
	hc := dockerengine.HostConfig{NetworkMode: d.net.Name, CapDrop: []string{"NET_RAW", "NET_ADMIN"}, IpcMode: "private", ShmSize: 64 << 20}
	if l.Unsafe {
		hc.CapDrop, hc.CapAdd = []string{"NET_ADMIN"}, []string{"NET_RAW"}
	}
	cc := dockerengine.ContainerConfig{
		Image: image, Cmd: l.Args, Env: list, Hostname: "C." + strconv.FormatInt(l.ID, 10),
		Labels:           map[string]string{LabelServer: d.cfg.Name, LabelInstance: strconv.FormatInt(l.ID, 10), LabelIP: ip.String()},
		HostConfig:       hc,
		NetworkingConfig: d.vnet.Networking(ep),
	}
	for k, v := range d.vnet.Labels(ep) {
		cc.Labels[k] = v
	}
	if l.Entrypoint != "" {
		cc.Entrypoint = []string{l.Entrypoint}
	}
	name := d.name(l.ID)
	id, err := d.eng.CreateContainer(ctx, name, cc)
	if err != nil {
		return "", fmt.Errorf("fakevast start %d: %w", l.ID, err)
	}
	if err = d.vnet.Sync(ctx); err == nil {
		if err = d.eng.StartContainer(ctx, id); err == nil {
			err = d.vnet.Started(ctx, id)
		}
	}
	if err != nil {
		_ = d.eng.RemoveContainer(context.WithoutCancel(ctx), id, true)
		_ = d.vnet.Sync(context.WithoutCancel(ctx))
		return "", fmt.Errorf("fakevast start %d: %w", l.ID, err)
	}
	d.watch(l.ID, id)
	d.log.Info("fakevast: container started", "instance", l.ID, "container", name, "ip", ip.String(), "image", image, "unsafe", l.Unsafe)
	return ip.String(), nil
}

// Stop implements Backend: remove the container.
func (d *Docker) Stop(ctx context.Context, id int64) error {
	err := d.eng.RemoveContainer(ctx, d.name(id), true)
	if err != nil && !errors.Is(err, dockerengine.ErrNotFound) {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.vnet.Sync(ctx)
}

// Kill implements Backend: SIGKILL the container, keep it.
func (d *Docker) Kill(ctx context.Context, id int64) error {
	err := d.eng.KillContainer(ctx, d.name(id), "KILL")
	if err != nil && !errors.Is(err, dockerengine.ErrNotFound) {
		return err
	}
	return nil
}

// Close stops the DNS responder and removes the network if this backend made
// it and no container is left on it.
func (d *Docker) Close() error {
	if d.dns != nil {
		_ = d.dns.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d.vnet != nil {
		_ = d.vnet.Close(ctx) // the table and the public network, once no rental is left
	}
	if d.created {
		if cs, err := d.eng.ListContainers(ctx, LabelServer+"="+d.cfg.Name); err == nil && len(cs) == 0 {
			_ = d.eng.RemoveNetwork(ctx, d.net.ID)
		}
	}
	return nil
}

// Cleanup removes every container of the fake named name and its network.
func Cleanup(ctx context.Context, eng *dockerengine.Client, name string) error {
	cs, err := eng.ListContainers(ctx, LabelServer+"="+name)
	if err != nil {
		return err
	}
	var first error
	for _, c := range cs {
		if err := eng.RemoveContainer(ctx, c.ID, true); err != nil && !errors.Is(err, dockerengine.ErrNotFound) && first == nil {
			first = err
		}
	}
	if err := vastnet.Cleanup(ctx, eng, func(c string) bool { return c == "fakevast-"+name }); err != nil && first == nil {
		first = err
	}
	return first
}
