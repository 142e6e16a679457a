package server

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/statedir"
)

// Config is one head's run: what `head serve` and `head up` read from their
// flags and config file, with the state dir already loaded (once, by the
// caller).
type Config struct {
	State *statedir.State
	File  *config.Config // the config file, checked by config.Load
	// Agent, Shim and Bootloader are files that replace the built-in ones
	// ("": built in; Shim "none": no shim).
	Agent, Shim, Bootloader string
	ListenA, ListenB        string // ports A and B
	Provider                string // wire.ProviderNone, ProviderDocker or ProviderVast
	Firewall                string // on, off or auto (FirewallOn)
	// PrivateNetwork is the config's provider.private_network (kind none).
	PrivateNetwork bool
	Retention      time.Duration // how long ended candidates stay listed
	// Nft runs nft scripts for the firewall (nil: the nft binary); tests
	// set it.
	Nft   func(ctx context.Context, script string) error
	Log   *slog.Logger // nil: discard
	Hooks Hooks
}

func (c Config) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// WrapAdmin, when set, wraps the admin socket's listener: a test counts
// the connections it takes (head up must open none to itself).
var WrapAdmin func(net.Listener) net.Listener
