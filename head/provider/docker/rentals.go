package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/rayvast/rayvast/head/provider"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/dockerengine"
)

// Rentals lists and ends one cluster's containers, and nothing more: what
// `head down` needs. Unlike New it makes no network and starts no DNS
// responder (a running head's responder keeps its port).
type Rentals struct {
	eng     *dockerengine.Client
	cluster string
	log     *slog.Logger
}

// OpenRentals returns the cluster's Rentals (nil engine: the default socket).
func OpenRentals(eng *dockerengine.Client, cluster string, log *slog.Logger) (*Rentals, error) {
	if eng == nil {
		eng = dockerengine.New("")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cluster == "" {
		return nil, errors.New("docker rentals: no cluster name")
	}
	return &Rentals{eng: eng, cluster: cluster, log: log}, nil
}

// List returns every container labelled with the cluster (exact label
// value), stopped ones too.
func (r *Rentals) List(ctx context.Context) ([]provider.Rental, error) {
	cs, err := r.eng.ListContainers(ctx, vastnet.LabelCluster+"="+r.cluster)
	if err != nil {
		return nil, fmt.Errorf("docker list: %w", err)
	}
	out := make([]provider.Rental, 0, len(cs))
	for _, c := range cs {
		if c.Labels[vastnet.LabelCluster] != r.cluster {
			continue // the filter is exact; keep it so if Docker's is not
		}
		name := c.ID
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, rentalFrom(name, c.Labels, c.State == "running"))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceID < out[j].InstanceID })
	return out, nil
}

// Destroy removes the container if it is the cluster's (like ending a vast
// rental: no grace). One already gone is not an error.
func (r *Rentals) Destroy(ctx context.Context, instanceID string) error {
	info, err := r.eng.InspectContainer(ctx, instanceID)
	if errors.Is(err, dockerengine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("docker destroy %s: %w", instanceID, err)
	}
	if info.Config.Labels[vastnet.LabelCluster] != r.cluster {
		return fmt.Errorf("docker destroy %s: not a container of cluster %q", instanceID, r.cluster)
	}
	if err := r.eng.RemoveContainer(ctx, info.ID, true); err != nil && !errors.Is(err, dockerengine.ErrNotFound) {
		return fmt.Errorf("docker destroy %s: %w", instanceID, err)
	}
	r.log.Info("docker destroyed", "instance", instanceID)
	return nil
}
