// Package provider is the seam between the head and whatever rents
// containers: the local Docker Engine, vast.ai, or nothing (an external
// provider drives the admin API instead). The head's driver calls Rent when a
// candidate is created, polls Get until the rental has a public IP, and calls
// Destroy when the candidate ends.
package provider

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// ErrGone means the instance no longer exists at the provider.
var ErrGone = errors.New("instance gone")

// RentRequest is one rental. Env and Command go into the rental as they are
// and are public on vast: nothing secret but the one-use join token.
type RentRequest struct {
	CandidateID string
	NodeType    string
	GPUs        int
	Env         map[string]string // the RAYVAST_* vars of docs/protocol.md §2
	Command     string            // bootloader.sh's text
	// Unsafe keeps NET_RAW in the container: only `head demo` sets it, to show
	// a refusal. Providers that cannot honour it ignore it.
	Unsafe bool
	// MaxDPH caps this rental's $/hour (what the cluster's max_dph_total
	// leaves); 0 = no cap. Providers that do not charge ignore it.
	MaxDPH float64
}

// Rental is what the provider knows of one instance.
type Rental struct {
	CandidateID string
	InstanceID  string
	HostID      string // the machine, for the blocklist
	PublicIP    string // empty until the instance runs
	Running     bool
	DPHTotal    float64 // $/hour the provider charges for it (0: free or unknown)
	// Vanished is the provider's status of an instance that is not
	// running and will not run again by itself ("exited", "offline",
	// "unknown", "stopped"); "" otherwise. After the instance ran, its
	// host lost it, unless EndNow says otherwise (a stop on purpose).
	Vanished string
	// Yield: another rental of this account (another head's, perhaps)
	// holds the same machine and keeps it; this one must end.
	Yield bool
	// EndNow is why the rental must end at once though its host is not at
	// fault ("" none): "outbid" (vast paused an interruptible rental),
	// "contract_ended" (stopped at its end date), "price_increase" (its
	// host's new price is above the configured cap), "stopped" and
	// "no_balance" (vast stopped an on-demand rental: on purpose, or the
	// account ran out of money). No blocklist.
	EndNow string
	// EndsAt is when the provider stops the rental by itself (vast's
	// contract end date); zero when none is known.
	EndsAt time.Time
}

// Statuser is a provider that can say why it rents nothing now (head
// status, the reconcile loop).
type Statuser interface {
	Status() wire.ProviderStatus
}

// Provider rents and ends instances.
type Provider interface {
	Name() string
	// Rent asks for an instance and returns as soon as the provider has
	// accepted it (InstanceID set; PublicIP maybe not yet).
	Rent(ctx context.Context, req RentRequest) (Rental, error)
	// Get returns the instance's current state, or ErrGone.
	Get(ctx context.Context, instanceID string) (Rental, error)
	// Destroy ends the instance. An instance already gone is not an error.
	Destroy(ctx context.Context, instanceID string) error
	// List returns every instance this cluster rented (found by label), so a
	// restarted head can find its rentals.
	List(ctx context.Context) ([]Rental, error)
	// Close releases what the provider itself created (a Docker network, a
	// DNS responder); it does not destroy instances.
	Close() error
}

// Options are where the head opens a built-in provider (the head passes
// them into each provider's own Config, with the provider's settings).
type Options struct {
	Cluster  string // labels rentals, so List finds only ours
	StateDir string // the head's state dir, for a provider's own files
	HeadIP   string // the head's IP as the rentals reach it
	Log      *slog.Logger
}
