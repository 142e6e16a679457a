package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/listenports"
)

// firewallOn: auto guards with the vast provider and with none unless its
// network is private; on and off are what they say.
func TestFirewallOn(t *testing.T) {
	for _, tc := range []struct {
		firewall, provider string
		private, want      bool
	}{
		{"auto", "vast", false, true}, {"auto", "docker", false, false}, {"auto", "none", false, true},
		{"auto", "none", true, false}, {"on", "none", true, true}, {"on", "docker", false, true}, {"off", "vast", false, false},
	} {
		if got := firewallOn(serveFlags{firewall: tc.firewall, provider: tc.provider, privateNetwork: tc.private}); got != tc.want {
			t.Errorf("--firewall %s --provider %s private_network=%v: on=%v, want %v", tc.firewall, tc.provider, tc.private, got, tc.want)
		}
	}
}

// publicRayPortsText names every exposed address with its port, says the
// firewall is off and how to turn it on.
func TestPublicRayPortsText(t *testing.T) {
	ls := []listenports.Listener{{Addr: netip.MustParseAddrPort("0.0.0.0:44217")}, {Addr: netip.MustParseAddrPort("10.1.2.1:6379")}}
	got := publicRayPortsText(ls)
	for _, want := range []string{"firewall off", "2 ports", "0.0.0.0:44217", "10.1.2.1:6379", "--firewall on"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
