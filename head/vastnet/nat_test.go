package vastnet

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// TestNatRules: the table maps each public IP:port to its candidate, each
// candidate to its public IP, refuses the rest of the public subnet but its
// gateway, refuses candidate to candidate at private addresses (ip family:
// not DNAT'd; bridge family: every frame forwarded between two of them),
// and skips the translation of a candidate's own public IP only with
// hairpin off.
func TestNatRules(t *testing.T) {
	pub := Network{Subnet: netip.MustParsePrefix("10.9.0.0/24"), Gateway: netip.MustParseAddr("10.9.0.1")}
	eps := []Endpoint{
		{Private: netip.MustParseAddr("10.8.0.2"), Public: netip.MustParseAddr("10.9.0.2"), Ports: []int{20000, 20001}},
		{Private: netip.MustParseAddr("10.8.0.3"), Public: netip.MustParseAddr("10.9.0.2"), Ports: []int{20064}},
	}
	off := natRules("rvdocker_x", pub, eps, false)
	for _, want := range []string{
		"add table ip rvdocker_x\ndelete table ip rvdocker_x\n",
		"10.9.0.2 . 20000 : 10.8.0.2, 10.9.0.2 . 20001 : 10.8.0.2, 10.9.0.2 . 20064 : 10.8.0.3",
		"elements = { 10.8.0.2 : 10.9.0.2, 10.8.0.3 : 10.9.0.2 }",
		"elements = { 10.8.0.2 . 10.9.0.2, 10.8.0.3 . 10.9.0.2 }",
		"ip saddr . ip daddr @behind return\n\t\tdnat to ip daddr . tcp dport map @portmap",
		"ct status dnat ip saddr @cands snat to ip saddr map @pubip",
		"type nat hook input priority 90; policy accept;\n\t\tsnat to ip saddr map @pubip",
		"ip daddr 10.9.0.0/24 ip daddr != 10.9.0.1 meta l4proto tcp reject with tcp reset",
		// The private bridge refuses candidate to candidate (both ways:
		// one rule, either address in the set).
		"add table bridge rvdocker_x\ndelete table bridge rvdocker_x\ntable bridge rvdocker_x {",
		"set cands {\n\t\ttype ipv4_addr\n\t\telements = { 10.8.0.2, 10.8.0.3 }",
		"type filter hook forward priority -10; policy accept;\n\t\tip saddr @cands ip daddr @cands ct status dnat meta mark set meta mark | 0x100000\n" +
			"\t\tip saddr @cands ip daddr @cands ct status & dnat == 0 reject with icmp type host-unreachable\n",
		"type filter hook forward priority 10; policy accept;\n\t\tip saddr @cands ip daddr @cands meta mark & 0x100000 == 0 counter drop",
	} {
		if !strings.Contains(off, want) {
			t.Errorf("hairpin off: rules lack %q:\n%s", want, off)
		}
	}
	if on := natRules("rvdocker_x", pub, eps, true); strings.Contains(on, "@behind return") {
		t.Errorf("hairpin on: rules still skip own-IP translation:\n%s", on)
	}
	if empty := natRules("rvdocker_x", pub, nil, false); strings.Contains(empty, "elements") {
		t.Errorf("no endpoints: rules name elements (nft refuses an empty list):\n%s", empty)
	}
}

// TestPortsLabel: ports survive the label round trip, written as ranges.
func TestPortsLabel(t *testing.T) {
	ps := append(SlotPorts(1), 7, 9, 10)
	s := FormatPorts(ps)
	if s != "7,9-10,20064-20127" {
		t.Errorf("FormatPorts = %q", s)
	}
	got, err := parsePorts(s)
	if err != nil || len(got) != 67 || got[0] != 7 || got[66] != 20127 {
		t.Errorf("parsePorts(%q) = %v, %v", s, got, err)
	}
	for _, bad := range []string{"", "x", "5-3", "1-99999"} {
		if _, err := parsePorts(bad); err == nil {
			t.Errorf("parsePorts(%q): no error", bad)
		}
	}
	e, ok := EndpointFrom(map[string]string{LabelPrivateIP: "10.8.0.2", LabelPublicIP: "10.9.0.2", LabelPorts: "20000-20001"})
	if want := (Endpoint{Private: netip.MustParseAddr("10.8.0.2"), Public: netip.MustParseAddr("10.9.0.2"), Ports: []int{20000, 20001}}); !ok || !reflect.DeepEqual(e, want) {
		t.Errorf("EndpointFrom = %+v, %v; want %+v", e, ok, want)
	}
	if _, ok := EndpointFrom(map[string]string{LabelPrivateIP: "10.8.0.2", LabelPorts: "20000"}); ok {
		t.Error("EndpointFrom without a public IP: ok")
	}
}
