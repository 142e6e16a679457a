package dockerengine

import (
	"context"
	"net/http"
	"net/url"
)

// NetworkConfig is the body of POST /networks/create.
type NetworkConfig struct {
	Name           string            `json:"Name"`
	Driver         string            `json:"Driver,omitempty"` // "" = bridge
	CheckDuplicate bool              `json:"CheckDuplicate"`
	Internal       bool              `json:"Internal,omitempty"`
	IPAM           *IPAM             `json:"IPAM,omitempty"`
	Labels         map[string]string `json:"Labels,omitempty"`
	Options        map[string]string `json:"Options,omitempty"`
}

// IPAM is a network's address plan. A network created with an explicit
// Subnet lets containers ask for a fixed address.
type IPAM struct {
	Driver string       `json:"Driver,omitempty"`
	Config []IPAMConfig `json:"Config"`
}

// IPAMConfig is one subnet of a network.
type IPAMConfig struct {
	Subnet  string `json:"Subnet,omitempty"`
	Gateway string `json:"Gateway,omitempty"`
}

// NetworkInfo is GET /networks/{id} (the fields we use).
type NetworkInfo struct {
	ID         string            `json:"Id"`
	Name       string            `json:"Name"`
	Driver     string            `json:"Driver"`
	IPAM       IPAM              `json:"IPAM"`
	Labels     map[string]string `json:"Labels"`
	Containers map[string]struct {
		Name        string `json:"Name"`
		IPv4Address string `json:"IPv4Address"` // CIDR form
	} `json:"Containers"`
}

// CreateNetwork creates a network and returns its ID.
func (c *Client) CreateNetwork(ctx context.Context, cfg NetworkConfig) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	if err := c.call(ctx, "create network "+cfg.Name, http.MethodPost, "/networks/create", nil, cfg, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// InspectNetwork returns a network by ID or name, or ErrNotFound.
func (c *Client) InspectNetwork(ctx context.Context, idOrName string) (NetworkInfo, error) {
	var info NetworkInfo
	err := c.call(ctx, "inspect network "+idOrName, http.MethodGet, "/networks/"+url.PathEscape(idOrName), nil, nil, &info)
	return info, err
}

// RemoveNetwork removes a network; it fails while containers are attached.
func (c *Client) RemoveNetwork(ctx context.Context, idOrName string) error {
	return c.call(ctx, "remove network "+idOrName, http.MethodDelete, "/networks/"+url.PathEscape(idOrName), nil, nil, nil)
}

// ListNetworks lists networks carrying every label given.
func (c *Client) ListNetworks(ctx context.Context, labels ...string) ([]NetworkInfo, error) {
	q := url.Values{}
	if len(labels) > 0 {
		q.Set("filters", labelFilter(labels...))
	}
	var out []NetworkInfo
	if err := c.call(ctx, "list networks", http.MethodGet, "/networks", q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}
