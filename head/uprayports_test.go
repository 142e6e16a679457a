package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/listenports"
)

// firewallOn: auto guards with the vast provider only; on and off are
// what they say.
func TestFirewallOn(t *testing.T) {
	for _, tc := range []struct {
		firewall, provider string
		want               bool
	}{
		{"auto", "vast", true}, {"auto", "docker", false}, {"auto", "none", false},
		{"on", "docker", true}, {"off", "vast", false},
	} {
		if got := firewallOn(serveFlags{firewall: tc.firewall, provider: tc.provider}); got != tc.want {
			t.Errorf("--firewall %s --provider %s: on=%v, want %v", tc.firewall, tc.provider, got, tc.want)
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
