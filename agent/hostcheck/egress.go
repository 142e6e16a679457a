package hostcheck

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/rayvast/rayvast/internal/wire"
)

// question is one who-am-I query.
type question struct {
	name  string
	qtype uint16
	class uint16
}

// questionsOf are the queries asked of a resolver of kind k (docs/protocol.md §5).
func questionsOf(k Kind) []question {
	switch k {
	case OpenDNS:
		return []question{{"myip.opendns.com.", dns.TypeA, dns.ClassINET}, {"myip.opendns.com.", dns.TypeAAAA, dns.ClassINET}}
	case Google:
		return []question{{"o-o.myaddr.l.google.com.", dns.TypeTXT, dns.ClassINET}}
	case Cloudflare:
		return []question{{"whoami.cloudflare.", dns.TypeTXT, dns.ClassCHAOS}}
	}
	return nil
}

// resolverAnswer is what one resolver said: the IPs it reported, or why not.
type resolverAnswer struct {
	res  Resolver
	ips  []netip.Addr
	errs []string
}

// checkEgress asks every resolver at once and passes only when at least one
// answered, every answer names the same IP, and that IP is cfg.PublicIP.
// A resolver that does not answer (timeout, refusal) is noted, not counted.
func checkEgress(ctx context.Context, cfg Config) wire.EgressCheck {
	if len(cfg.Resolvers) == 0 {
		return wire.EgressCheck{Detail: "no resolvers configured"}
	}
	answers := askAll(ctx, cfg)

	var seen []netip.Addr
	var says, silent []string
	for _, a := range answers {
		if len(a.ips) == 0 {
			silent = append(silent, a.res.String()+": "+strings.Join(a.errs, "; "))
			continue
		}
		says = append(says, a.res.String()+" says "+joinAddrs(a.ips))
		for _, ip := range a.ips {
			if !slices.Contains(seen, ip) {
				seen = append(seen, ip)
			}
		}
	}
	note := ""
	if len(silent) > 0 {
		note = "; no answer from " + strings.Join(silent, ", ")
	}
	switch {
	case len(seen) == 0:
		return wire.EgressCheck{Detail: "no resolver answered" + note}
	case len(seen) > 1:
		return wire.EgressCheck{IP: seen[0].String(), Detail: "resolvers disagree: " + strings.Join(says, ", ") + note}
	}
	ip := seen[0]
	public, err := netip.ParseAddr(strings.TrimSpace(cfg.PublicIP))
	switch {
	case err != nil:
		return wire.EgressCheck{IP: ip.String(), Detail: fmt.Sprintf("egress IP %s, but public IP %q is not an IP%s", ip, cfg.PublicIP, note)}
	case public.Unmap().WithZone("") != ip:
		return wire.EgressCheck{IP: ip.String(), Detail: fmt.Sprintf("egress IP %s is not the public IP %s (%s)%s", ip, public, strings.Join(says, ", "), note)}
	}
	return wire.EgressCheck{OK: true, IP: ip.String(),
		Detail: fmt.Sprintf("egress IP %s is the public IP (%d of %d resolvers answered)%s", ip, len(says), len(answers), note)}
}

// askAll runs every query of every resolver concurrently, each bounded by
// cfg.Timeout, and returns the answers in resolver order.
func askAll(ctx context.Context, cfg Config) []resolverAnswer {
	answers := make([]resolverAnswer, len(cfg.Resolvers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, r := range cfg.Resolvers {
		answers[i].res = r
		qs := questionsOf(r.Kind)
		if len(qs) == 0 {
			answers[i].errs = append(answers[i].errs, fmt.Sprintf("unknown kind %q", r.Kind))
		}
		for _, q := range qs {
			wg.Go(func() {
				ips, err := ask(ctx, cfg, r.Addr.String(), q)
				mu.Lock()
				defer mu.Unlock()
				a := &answers[i]
				if err != nil {
					a.errs = append(a.errs, err.Error())
				}
				for _, ip := range ips {
					if !slices.Contains(a.ips, ip) {
						a.ips = append(a.ips, ip)
					}
				}
			})
		}
	}
	wg.Wait()
	return answers
}

// ask sends one question over UDP (TCP if the answer was truncated) and
// returns the IPs in the answer section.
func ask(ctx context.Context, cfg Config, addr string, q question) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	m := new(dns.Msg)
	m.SetQuestion(q.name, q.qtype)
	m.Question[0].Qclass = q.class
	c := &dns.Client{Net: "udp", Timeout: cfg.Timeout}
	resp, _, err := c.ExchangeContext(ctx, m, addr)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, m, addr)
	}
	qname := dns.TypeToString[q.qtype] + " " + q.name
	if err != nil {
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: timeout after %s", qname, cfg.Timeout)
		}
		return nil, fmt.Errorf("%s: %w", qname, err)
	}
	if resp.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s: %s", qname, dns.RcodeToString[resp.Rcode])
	}
	ips := answerIPs(resp, q)
	if len(ips) == 0 && q.qtype != dns.TypeAAAA && q.qtype != dns.TypeA {
		return nil, fmt.Errorf("%s: no IP in answer", qname)
	}
	return ips, nil
}

// answerIPs extracts the reported IPs from the answer section: A/AAAA
// records, and TXT strings that parse as an IP. Other TXT strings, like
// Google's "edns0-client-subnet 192.0.2.0/24", are ignored.
func answerIPs(resp *dns.Msg, q question) []netip.Addr {
	var out []netip.Addr
	add := func(ip netip.Addr, ok bool) {
		if ok && !slices.Contains(out, ip.Unmap()) {
			out = append(out, ip.Unmap())
		}
	}
	for _, rr := range resp.Answer {
		if !strings.EqualFold(rr.Header().Name, q.name) {
			continue
		}
		switch rr := rr.(type) {
		case *dns.A:
			add(netip.AddrFromSlice(rr.A))
		case *dns.AAAA:
			add(netip.AddrFromSlice(rr.AAAA))
		case *dns.TXT:
			for _, s := range rr.Txt {
				ip, err := netip.ParseAddr(strings.TrimSpace(s))
				add(ip, err == nil && ip.Zone() == "")
			}
		}
	}
	return out
}

func joinAddrs(ips []netip.Addr) string {
	var s []string
	for _, ip := range ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, "/")
}
