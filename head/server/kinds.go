package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/head/reconcile"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/wire"
)

// kind is everything the head does differently for one provider kind, so
// that a new provider is one row of kinds and nothing else in the head
// names it (the anchor: nomad's fingerprint name→factory table).
type kind struct {
	// settings reads the kind's settings from its config block (nil:
	// none) and the environment into ps.
	settings func(ps *ProviderSettings, pc *wire.ProviderConfig, getenv func(string) string) error
	// prepare makes what open needs and the provider does not make
	// itself (nil: nothing), before open.
	prepare func(ctx context.Context, ps *ProviderSettings, rayVersion string, log *slog.Logger) error
	// open opens the provider of ps (nil: none; the admin API's caller
	// rents).
	open func(ctx context.Context, ps ProviderSettings, block *blocklist.List, o provider.Options) (provider.Provider, error)
	// firewall is --firewall auto's answer: are the kind's rentals on a
	// network anyone else reaches (private: the config's
	// provider.private_network)?
	firewall func(private bool) bool
	// downRentals opens what lists and ends the rentals for head down;
	// nil: the provider itself (open).
	downRentals func(cluster string, log *slog.Logger) (reconcile.Rentals, error)
	// cleanup runs after head down once no head runs: what the kind left
	// on this machine (nil: nothing).
	cleanup func(ctx context.Context, cluster string) error
}

var kinds = map[string]kind{
	// An external provider's rentals are as public as vast's, whoever
	// rents them, unless the config says its network is private.
	wire.ProviderNone: {firewall: func(private bool) bool { return !private }},
	// The docker provider's local network stays open by default.
	wire.ProviderDocker: {
		settings: func(ps *ProviderSettings, pc *wire.ProviderConfig, getenv func(string) string) (err error) {
			ps.docker, err = dockerSettings(pc, getenv)
			ps.rayWheels = getenv(candidateimage.EnvRayWheels)
			return err
		},
		prepare: ensureCandidateImage,
		open: func(ctx context.Context, ps ProviderSettings, _ *blocklist.List, o provider.Options) (provider.Provider, error) {
			p, err := docker.New(ctx, docker.Config{Settings: ps.docker, Cluster: o.Cluster, StateDir: o.StateDir, HeadIP: o.HeadIP, Log: o.Log})
			if err != nil {
				return nil, err // not a typed nil in the interface; its errors say "docker provider: …"
			}
			return p, nil
		},
		firewall: func(bool) bool { return false },
		// Only list and end: the full provider would make the network and
		// start a DNS responder, rewriting a running head's DNS port in the
		// state dir.
		downRentals: func(cluster string, log *slog.Logger) (reconcile.Rentals, error) {
			return docker.OpenRentals(nil, cluster, log)
		},
		// Nothing uses the cluster's network any more (a running head's
		// provider still would): remove it with anything left on it.
		cleanup: func(ctx context.Context, cluster string) error {
			return vastnet.Cleanup(ctx, dockerengine.New(""), func(c string) bool { return c == cluster })
		},
	},
	// Rentals on vast reach the head from the internet.
	wire.ProviderVast: {
		settings: func(ps *ProviderSettings, pc *wire.ProviderConfig, getenv func(string) string) (err error) {
			ps.vast, ps.vastKey, err = vastSettings(pc, getenv)
			return err
		},
		open: func(ctx context.Context, ps ProviderSettings, block *blocklist.List, o provider.Options) (provider.Provider, error) {
			p, err := vast.New(vast.Config{Settings: ps.vast, Key: ps.vastKey, Cluster: o.Cluster, Blocklist: block, Log: o.Log})
			if err != nil {
				return nil, err // likewise; "vast provider: …"
			}
			go p.CheckKeyScope(ctx) // once, in the log; never a reason to stop
			return p, nil
		},
		firewall: func(bool) bool { return true },
	},
}

// RentsItself reports whether a head with provider kind kindName rents
// its nodes itself (a built-in provider: its loop drains at head down).
func RentsItself(kindName string) bool { return kinds[kindName].open != nil }

// DownRentals opens what lists and ends the rentals of kind for head
// down: nil with no built-in provider. closeRentals is never nil.
func DownRentals(ctx context.Context, kindName string, pc *wire.ProviderConfig, o provider.Options) (rentals reconcile.Rentals, closeRentals func(), err error) {
	if k := kinds[kindName]; k.downRentals != nil {
		r, err := k.downRentals(o.Cluster, o.Log)
		if err != nil {
			return nil, nil, err
		}
		return r, func() {}, nil
	}
	ps, err := ReadProviderSettings(kindName, pc)
	if err != nil {
		return nil, nil, err
	}
	p, err := OpenProvider(ctx, ps, blocklist.New(time.Now), o)
	if err != nil {
		return nil, nil, err
	}
	if p == nil {
		return nil, func() {}, nil
	}
	return p, func() { p.Close() }, nil
}

// Cleanup removes what kind left on this machine once no head of cluster
// runs (head down).
func Cleanup(ctx context.Context, kindName, cluster string) error {
	if k := kinds[kindName]; k.cleanup != nil {
		return k.cleanup(ctx, cluster)
	}
	return nil
}
