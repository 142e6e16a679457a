package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/statedir"
)

// FirewallOn: auto guards with the vast provider and with none unless its
// network is private; on and off are what they say.
func TestFirewallOn(t *testing.T) {
	for _, tc := range []struct {
		firewall, provider string
		private, want      bool
	}{
		{"auto", "vast", false, true}, {"auto", "docker", false, false}, {"auto", "none", false, true},
		{"auto", "none", true, false}, {"on", "none", true, true}, {"on", "docker", false, true}, {"off", "vast", false, false},
	} {
		if got := (Config{Firewall: tc.firewall, Provider: tc.provider, PrivateNetwork: tc.private}).FirewallOn(); got != tc.want {
			t.Errorf("--firewall %s --provider %s private_network=%v: on=%v, want %v", tc.firewall, tc.provider, tc.private, got, tc.want)
		}
	}
}

// TestOpenGuardOff: with the firewall off no table is made and the Ray
// head's ports are never asked; only a leftover table is looked for.
func TestOpenGuardOff(t *testing.T) {
	var scripts []string
	asked := 0
	f := Config{Firewall: "off", Provider: "vast", Nft: func(_ context.Context, s string) error {
		scripts = append(scripts, s)
		return errors.New("no such table")
	}}
	g, err := openGuard(context.Background(), f, &statedir.State{AppID: "0123456789abcdef"}, []int{8443},
		func() ([]int, error) { asked++; return nil, nil }, slog.New(slog.DiscardHandler))
	if g != nil || err != nil {
		t.Fatalf("openGuard = %v, %v; want nil, nil", g, err)
	}
	time.Sleep(20 * time.Millisecond)
	if asked != 0 {
		t.Errorf("firewall off: RayPorts asked %d times", asked)
	}
	for _, s := range scripts {
		if strings.Contains(s, "add") || strings.Contains(s, "delete") {
			t.Errorf("firewall off changed nftables: %q", s)
		}
	}
}
