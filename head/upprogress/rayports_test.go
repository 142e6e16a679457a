package upprogress

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/listenports"
)

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
