package hostcheck

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/rayvast/rayvast/internal/whoami"
)

// whoamiAt starts a real who-am-I server on ip (a loopback address) and
// returns it as a resolver of kind k. answer nil echoes the source IP.
func whoamiAt(t testing.TB, k Kind, ip string, answer func(net.IP) net.IP) Resolver {
	t.Helper()
	s, err := whoami.Start(net.JoinHostPort(ip, "0"), answer, nil)
	if err != nil {
		t.Fatalf("whoami on %s: %v", ip, err)
	}
	t.Cleanup(func() { s.Close() })
	return Resolver{Kind: k, Addr: netip.MustParseAddrPort(s.Addr())}
}

func fixed(ip string) func(net.IP) net.IP {
	return func(net.IP) net.IP { return net.ParseIP(ip) }
}

// silentAt is a UDP socket that reads queries and never answers.
func silentAt(t *testing.T, k Kind, ip string) Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	return Resolver{Kind: k, Addr: netip.MustParseAddrPort(pc.LocalAddr().String())}
}

func TestEgress(t *testing.T) {
	tests := []struct {
		name       string
		resolvers  func(t *testing.T) []Resolver
		publicIP   string
		wantOK     bool
		wantIP     string
		wantDetail []string
	}{
		{"all three kinds echo the source", func(t *testing.T) []Resolver {
			return []Resolver{whoamiAt(t, OpenDNS, "127.0.0.1", nil), whoamiAt(t, Google, "127.0.0.1", nil), whoamiAt(t, Cloudflare, "127.0.0.1", nil)}
		}, "127.0.0.1", true, "127.0.0.1", []string{"egress IP 127.0.0.1 is the public IP (3 of 3 resolvers answered)"}},
		{"servers on other loopback addresses", func(t *testing.T) []Resolver {
			return []Resolver{whoamiAt(t, OpenDNS, "127.0.0.2", fixed("192.0.2.10")), whoamiAt(t, Google, "127.0.0.3", fixed("192.0.2.10"))}
		}, "192.0.2.10", true, "192.0.2.10", []string{"2 of 2"}},
		{"wrong public IP", func(t *testing.T) []Resolver {
			return []Resolver{whoamiAt(t, OpenDNS, "127.0.0.1", nil), whoamiAt(t, Cloudflare, "127.0.0.1", nil)}
		}, "203.0.113.9", false, "127.0.0.1", []string{"egress IP 127.0.0.1 is not the public IP 203.0.113.9"}},
		{"two resolvers disagree", func(t *testing.T) []Resolver {
			return []Resolver{whoamiAt(t, Google, "127.0.0.2", fixed("198.51.100.1")), whoamiAt(t, Cloudflare, "127.0.0.3", fixed("198.51.100.2"))}
		}, "198.51.100.1", false, "198.51.100.1", []string{"resolvers disagree", "says 198.51.100.1", "says 198.51.100.2"}},
		{"a silent resolver times out, the others decide", func(t *testing.T) []Resolver {
			return []Resolver{silentAt(t, OpenDNS, "127.0.0.4"), whoamiAt(t, Google, "127.0.0.1", nil)}
		}, "127.0.0.1", true, "127.0.0.1", []string{"1 of 2", "no answer from opendns@127.0.0.4", "A myip.opendns.com.: timeout after"}},
		{"only silent resolvers", func(t *testing.T) []Resolver {
			return []Resolver{silentAt(t, Cloudflare, "127.0.0.4")}
		}, "127.0.0.1", false, "", []string{"no resolver answered", "TXT whoami.cloudflare.: timeout"}},
		{"a refusing resolver is noted, not counted", func(t *testing.T) []Resolver {
			return []Resolver{whoamiAt(t, OpenDNS, "127.0.0.2", func(net.IP) net.IP { return nil }), whoamiAt(t, Cloudflare, "127.0.0.1", nil)}
		}, "127.0.0.1", true, "127.0.0.1", []string{"1 of 2", "REFUSED"}},
		{"IPv6 egress, compared as IPs", func(t *testing.T) []Resolver {
			return []Resolver{whoamiAt(t, OpenDNS, "127.0.0.1", fixed("2001:db8::1")), whoamiAt(t, Google, "127.0.0.2", fixed("2001:db8::1"))}
		}, "2001:DB8:0:0::1", true, "2001:db8::1", []string{"2 of 2"}},
		{"v4-mapped public IP matches v4", func(t *testing.T) []Resolver {
			return []Resolver{whoamiAt(t, OpenDNS, "127.0.0.1", nil)}
		}, "::ffff:127.0.0.1", true, "127.0.0.1", nil},
		{"public IP not an IP", func(t *testing.T) []Resolver {
			return []Resolver{whoamiAt(t, OpenDNS, "127.0.0.1", nil)}
		}, "vast.ai", false, "127.0.0.1", []string{`public IP "vast.ai" is not an IP`}},
		{"no public IP", func(t *testing.T) []Resolver {
			return []Resolver{whoamiAt(t, OpenDNS, "127.0.0.1", nil)}
		}, "", false, "127.0.0.1", []string{`public IP "" is not an IP`}},
		{"no resolvers", func(t *testing.T) []Resolver { return nil }, "127.0.0.1", false, "", []string{"no resolvers configured"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{PublicIP: tt.publicIP, Resolvers: tt.resolvers(t), Timeout: 300 * time.Millisecond}.withDefaults()
			got := checkEgress(context.Background(), cfg)
			if got.OK != tt.wantOK || got.IP != tt.wantIP {
				t.Errorf("got ok=%v ip=%q (%s), want ok=%v ip=%q", got.OK, got.IP, got.Detail, tt.wantOK, tt.wantIP)
			}
			for _, w := range tt.wantDetail {
				if !strings.Contains(got.Detail, w) {
					t.Errorf("detail %q does not contain %q", got.Detail, w)
				}
			}
		})
	}
}

// TestEgressCancelled proves a cancelled context ends the check at once
// even with a silent resolver and a long timeout.
func TestEgressCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := Config{PublicIP: "127.0.0.1", Resolvers: []Resolver{silentAt(t, OpenDNS, "127.0.0.1")}, Timeout: time.Hour}.withDefaults()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if got := checkEgress(ctx, cfg); got.OK {
			t.Errorf("cancelled check passed: %+v", got)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("cancelled egress check still running after a minute")
	}
}

// TestEgressTCPFallback proves a truncated UDP answer is asked again over TCP.
func TestEgressTCPFallback(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Skipf("SKIP: TCP port of %s taken: %v", pc.LocalAddr(), err)
	}
	h := func(w dns.ResponseWriter, req *dns.Msg) {
		resp := new(dns.Msg)
		resp.SetReply(req)
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			resp.Truncated = true
		} else {
			resp.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS}, Txt: []string{"192.0.2.55"}}}
		}
		w.WriteMsg(resp)
	}
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: dns.HandlerFunc(h)}, {Listener: ln, Handler: dns.HandlerFunc(h)}} {
		go s.ActivateAndServe()
		t.Cleanup(func() { s.Shutdown() })
	}
	cfg := Config{PublicIP: "192.0.2.55", Resolvers: []Resolver{{Cloudflare, netip.MustParseAddrPort(pc.LocalAddr().String())}}}.withDefaults()
	if got := checkEgress(context.Background(), cfg); !got.OK || got.IP != "192.0.2.55" {
		t.Errorf("got %+v, want ok with 192.0.2.55 from the TCP answer", got)
	}
}

// TestAnswerIPs proves Google's extra edns0-client-subnet TXT and records
// for other names are ignored.
func TestAnswerIPs(t *testing.T) {
	q := question{"o-o.myaddr.l.google.com.", dns.TypeTXT, dns.ClassINET}
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	resp := &dns.Msg{Answer: []dns.RR{
		rr(`o-o.myaddr.l.google.com. 60 IN TXT "edns0-client-subnet 192.0.2.0/24"`),
		rr(`o-o.myaddr.l.google.com. 60 IN TXT "203.0.113.7"`),
		rr(`other.example. 60 IN TXT "198.51.100.9"`),
		rr(`O-O.MYADDR.L.GOOGLE.COM. 60 IN TXT "203.0.113.7"`),
	}}
	got := answerIPs(resp, q)
	if len(got) != 1 || got[0] != netip.MustParseAddr("203.0.113.7") {
		t.Errorf("got %v, want [203.0.113.7]", got)
	}
	resp = &dns.Msg{Answer: []dns.RR{rr(`o-o.myaddr.l.google.com. 60 IN TXT "edns0-client-subnet 192.0.2.0/24"`)}}
	if got := answerIPs(resp, q); len(got) != 0 {
		t.Errorf("ECS only: got %v, want none", got)
	}
}
