package hostcheck

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Kind is how a resolver is asked "who am I" (docs/protocol.md §5).
type Kind string

// The resolver kinds of RAYVAST_EGRESS_RESOLVERS.
const (
	OpenDNS    Kind = "opendns"    // A and AAAA myip.opendns.com., class IN
	Google     Kind = "google"     // TXT o-o.myaddr.l.google.com., class IN (ns1.google.com)
	Cloudflare Kind = "cloudflare" // TXT whoami.cloudflare., class CH
)

// Resolver is one who-am-I DNS server.
type Resolver struct {
	Kind Kind
	Addr netip.AddrPort
}

// String is the kind@ip:port form ParseResolvers reads.
func (r Resolver) String() string { return string(r.Kind) + "@" + r.Addr.String() }

// DefaultResolvers are the public who-am-I servers used in production when
// RAYVAST_EGRESS_RESOLVERS is unset. Tests never use them.
var DefaultResolvers = []Resolver{
	{OpenDNS, netip.MustParseAddrPort("208.67.222.222:53")},
	{Google, netip.MustParseAddrPort("216.239.32.10:53")}, // ns1.google.com
	{Cloudflare, netip.MustParseAddrPort("1.1.1.1:53")},
}

// ParseResolvers reads RAYVAST_EGRESS_RESOLVERS: a comma list of
// kind@ip:port (IPv6 as kind@[ip]:port). Spaces around items are ignored;
// an empty list, an empty item, an unknown kind, a missing port or a bad IP
// is an error naming the item.
func ParseResolvers(s string) ([]Resolver, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("parse resolvers: empty list")
	}
	var out []Resolver
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		r, err := parseResolver(item)
		if err != nil {
			return nil, fmt.Errorf("parse resolver %d %q: %w", i+1, item, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseResolver(item string) (Resolver, error) {
	if item == "" {
		return Resolver{}, fmt.Errorf("empty item")
	}
	kind, hostport, ok := strings.Cut(item, "@")
	if !ok {
		return Resolver{}, fmt.Errorf("want kind@ip:port")
	}
	k := Kind(kind)
	switch k {
	case OpenDNS, Google, Cloudflare:
	default:
		return Resolver{}, fmt.Errorf("unknown kind %q (want opendns, google or cloudflare)", kind)
	}
	host, port, err := splitHostPort(hostport)
	if err != nil {
		return Resolver{}, err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return Resolver{}, fmt.Errorf("bad IP %q", host)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return Resolver{}, fmt.Errorf("bad port %q", port)
	}
	return Resolver{Kind: k, Addr: netip.AddrPortFrom(ip.Unmap(), uint16(n))}, nil
}

// splitHostPort is net.SplitHostPort with messages that say what is missing.
func splitHostPort(s string) (host, port string, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return "", "", fmt.Errorf("missing ] in %q", s)
		}
		host, rest := s[1:end], s[end+1:]
		if !strings.HasPrefix(rest, ":") || rest == ":" {
			return "", "", fmt.Errorf("missing port in %q", s)
		}
		return host, rest[1:], nil
	}
	i := strings.LastIndex(s, ":")
	if i < 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("missing port in %q", s)
	}
	host = s[:i]
	if strings.Contains(host, ":") {
		return "", "", fmt.Errorf("IPv6 address needs brackets: %q", s)
	}
	return host, s[i+1:], nil
}
