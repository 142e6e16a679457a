package server

import "testing"

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
