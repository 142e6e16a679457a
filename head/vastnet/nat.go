package vastnet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// TablePrefix starts the name of every NAT table of vast's network: family
// ip, so it can never be the head's own firewall table (family inet,
// "rayvast" or "rayvast_<app id>", head/firewall).
const TablePrefix = "rvdocker_"

// Hook priorities of the NAT table. The kernel runs all nat chains of a
// hook from the NAT core's own hook (input SNAT at 100, after the filter
// hooks at 0; head/firewall's input chain therefore runs at 110, after it);
// among nat chains these order ours before Docker's (-100, 100), so ours
// decide for the candidates' addresses.
const (
	prioDNAT   = -110
	prioSNAT   = 90
	prioInput  = 90
	prioFilter = -10
	prioBridge = 10 // bridge family: after br_netfilter's forward hook (0)
)

// markDNAT is the packet mark bit the ip table's forward chain sets on a
// DNAT'd frame between two candidates (the public path), for the bridge
// table (isolationRules) to let it pass.
const markDNAT = 0x00100000

// TableName is the nftables table (family ip) of a cluster's vast network:
// a hash, since cluster names may hold characters nft names may not.
func TableName(cluster string) string {
	h := sha256.Sum256([]byte(cluster))
	return TablePrefix + hex.EncodeToString(h[:6])
}

// natRules is the whole table, replaced in one `nft -f -` transaction
// ("add" first so "delete" never fails). What each chain does:
//   - prerouting, output: public IP:port → the candidate's private IP (the
//     host's DNAT on vast), for connections from other candidates and from
//     the head's machine; with hairpin off a candidate's connections to its
//     own public IP are not translated (and the forward chain refuses them).
//   - postrouting: a candidate reached through its public IP sees the
//     caller's public IP, as from across the internet (hairpin included).
//   - input: every connection of a candidate to this machine (the head, the
//     who-am-I DNS) comes from its public IP.
//   - forward, filter-output: nothing is sent to the public subnet itself:
//     no container holds those addresses, so whatever was not translated is
//     refused at once instead of waiting on ARP.
//
// A second table of the same name, family bridge (isolationRules), keeps
// the candidates apart on the private bridge.
func natRules(table string, public Network, eps []Endpoint, hairpin bool) string {
	var portmap, pubip, cands, behind []string
	for _, e := range eps {
		c, p := e.Private.String(), e.Public.String()
		for _, port := range e.Ports {
			portmap = append(portmap, fmt.Sprintf("%s . %d : %s", p, port, c))
		}
		pubip = append(pubip, c+" : "+p)
		cands = append(cands, c)
		behind = append(behind, c+" . "+p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "add table ip %[1]s\ndelete table ip %[1]s\ntable ip %[1]s {\n", table)
	writeSet(&b, "map portmap", "ipv4_addr . inet_service : ipv4_addr", portmap)
	writeSet(&b, "map pubip", "ipv4_addr : ipv4_addr", pubip)
	writeSet(&b, "set cands", "ipv4_addr", cands)
	writeSet(&b, "set behind", "ipv4_addr . ipv4_addr", behind)
	noHairpin := "\t\tip saddr . ip daddr @behind return\n"
	if hairpin {
		noHairpin = ""
	}
	fmt.Fprintf(&b, "\tchain prerouting {\n\t\ttype nat hook prerouting priority %d; policy accept;\n%s\t\tdnat to ip daddr . tcp dport map @portmap\n\t}\n", prioDNAT, noHairpin)
	fmt.Fprintf(&b, "\tchain output {\n\t\ttype nat hook output priority %d; policy accept;\n\t\tdnat to ip daddr . tcp dport map @portmap\n\t}\n", prioDNAT)
	fmt.Fprintf(&b, "\tchain postrouting {\n\t\ttype nat hook postrouting priority %d; policy accept;\n\t\tct status dnat ip saddr @cands snat to ip saddr map @pubip\n\t}\n", prioSNAT)
	fmt.Fprintf(&b, "\tchain input {\n\t\ttype nat hook input priority %d; policy accept;\n\t\tsnat to ip saddr map @pubip\n\t}\n", prioInput)
	// The public gateway is this machine's own address: the refusals sent
	// back to it must pass.
	refuse := fmt.Sprintf("\t\tip daddr %s ip daddr != %s meta l4proto tcp reject with tcp reset\n\t\tip daddr %[1]s ip daddr != %[2]s reject with icmp type admin-prohibited\n", public.Subnet, public.Gateway)
	// Candidate to candidate at private addresses (a frame the bridge
	// forwards, handed to this hook by br_netfilter): refused at once, as
	// "No route to host"; the DNAT'd path (public IP:port) passes.
	isolate := fmt.Sprintf("\t\tip saddr @cands ip daddr @cands ct status dnat meta mark set meta mark | %#x\n"+
		"\t\tip saddr @cands ip daddr @cands ct status & dnat == 0 reject with icmp type host-unreachable\n", markDNAT)
	fmt.Fprintf(&b, "\tchain forward {\n\t\ttype filter hook forward priority %d; policy accept;\n%s%s\t}\n", prioFilter, isolate, refuse)
	fmt.Fprintf(&b, "\tchain filter_output {\n\t\ttype filter hook output priority %d; policy accept;\n%s\t}\n", prioFilter, refuse)
	b.WriteString("}\n")
	b.WriteString(isolationRules(table, cands))
	return b.String()
}

// isolationRules is the table (family bridge) that, with the ip table's
// forward rule, makes the private bridge what vast's network is: rentals
// sit on different hosts and reach one another only at public IP:forwarded
// port, never at their private addresses. The direct path between two
// candidates is a frame the bridge forwards from one port to another; the
// path through a public IP is routed by this machine (to the gateway's MAC,
// DNAT'd, sent back out the bridge) and never passes the bridge's forward
// hook, nor does anything to or from the gateway (the head). Where Docker
// has loaded br_netfilter (bridge-nf-call-iptables), bridged frames also
// pass the ip family's forward hook, called from the bridge's forward hook
// at priority 0: there the ip table refuses them with ICMP host-unreachable
// (a bridge-family reject needs nft_reject_bridge, which kernels may lack).
// This chain, at priority 10 after it, drops whatever got past (no
// br_netfilter: a connect then times out instead) but the public path:
// br_netfilter bridges a frame whose DNAT leads back out the bridge it came
// in on ("bridged DNAT", the path from one candidate to another's public
// IP:port), so that frame does pass this hook; the ip table's forward chain
// marks it (markDNAT: the bridge family here has no conntrack to ask).
// IPv6 is not matched: the networks are IPv4 only.
func isolationRules(table string, cands []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "add table bridge %[1]s\ndelete table bridge %[1]s\ntable bridge %[1]s {\n", table)
	writeSet(&b, "set cands", "ipv4_addr", cands)
	fmt.Fprintf(&b, "\tchain forward {\n\t\ttype filter hook forward priority %d; policy accept;\n"+
		"\t\tip saddr @cands ip daddr @cands meta mark & %#x == 0 counter drop\n\t}\n", prioBridge, markDNAT)
	b.WriteString("}\n")
	return b.String()
}

func writeSet(b *strings.Builder, kind, typ string, elems []string) {
	sort.Strings(elems)
	fmt.Fprintf(b, "\t%s {\n\t\ttype %s\n", kind, typ)
	if len(elems) > 0 {
		fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(elems, ", "))
	}
	b.WriteString("\t}\n")
}

// RemoveTable deletes a cluster's NAT table and its isolation table
// (family bridge); one already gone is fine.
func RemoveTable(ctx context.Context, nft func(ctx context.Context, script string) error, cluster string) error {
	t := TableName(cluster)
	if err := nft(ctx, fmt.Sprintf("add table ip %[1]s\ndelete table ip %[1]s\nadd table bridge %[1]s\ndelete table bridge %[1]s\n", t)); err != nil {
		return fmt.Errorf("remove nat table ip %s: %w", t, err)
	}
	return nil
}

// validEndpoint is what the table may hold: IPv4 addresses and ports.
func validEndpoint(e Endpoint) bool {
	if !e.Private.Is4() || !e.Public.Is4() || len(e.Ports) == 0 {
		return false
	}
	for _, p := range e.Ports {
		if p < 1 || p > 65535 {
			return false
		}
	}
	return true
}
