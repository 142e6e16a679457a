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
)

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
	fmt.Fprintf(&b, "\tchain forward {\n\t\ttype filter hook forward priority %d; policy accept;\n%s\t}\n", prioFilter, refuse)
	fmt.Fprintf(&b, "\tchain filter_output {\n\t\ttype filter hook output priority %d; policy accept;\n%s\t}\n", prioFilter, refuse)
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

// RemoveTable deletes a cluster's NAT table; one already gone is fine.
func RemoveTable(ctx context.Context, nft func(ctx context.Context, script string) error, cluster string) error {
	t := TableName(cluster)
	if err := nft(ctx, fmt.Sprintf("add table ip %[1]s\ndelete table ip %[1]s\n", t)); err != nil {
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
