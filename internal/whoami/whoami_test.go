package whoami

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func start(t *testing.T, addr string, answer func(net.IP) net.IP) *Server {
	t.Helper()
	s, err := Start(addr, answer, nil)
	if err != nil {
		t.Fatalf("Start(%s): %v", addr, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func query(t *testing.T, network, addr, name string, qtype, class uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Question[0].Qclass = class
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, dns.TypeToString[qtype], name, err)
	}
	return resp
}

// answerText is the one answer's value ("" for none), and the rcode.
func answerText(resp *dns.Msg) string {
	if len(resp.Answer) == 0 {
		return ""
	}
	switch rr := resp.Answer[0].(type) {
	case *dns.A:
		return rr.A.String()
	case *dns.AAAA:
		return rr.AAAA.String()
	case *dns.TXT:
		return strings.Join(rr.Txt, " ")
	}
	return "?"
}

// TestKinds proves every resolver kind gets the querier's source IP, over
// both UDP and TCP, and that other questions are refused or get no data.
func TestKinds(t *testing.T) {
	s := start(t, "127.0.0.1:0", nil)
	tests := []struct {
		name       string
		qname      string
		qtype      uint16
		class      uint16
		wantRcode  int
		wantAnswer string
	}{
		{"opendns A", "myip.opendns.com.", dns.TypeA, dns.ClassINET, dns.RcodeSuccess, "127.0.0.1"},
		{"opendns A any case", "MyIP.OpenDNS.com.", dns.TypeA, dns.ClassINET, dns.RcodeSuccess, "127.0.0.1"},
		{"opendns AAAA from v4 is NODATA", "myip.opendns.com.", dns.TypeAAAA, dns.ClassINET, dns.RcodeSuccess, ""},
		{"google TXT", "o-o.myaddr.l.google.com.", dns.TypeTXT, dns.ClassINET, dns.RcodeSuccess, "127.0.0.1"},
		{"cloudflare CH TXT", "whoami.cloudflare.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeSuccess, "127.0.0.1"},
		{"cloudflare in class IN refused", "whoami.cloudflare.", dns.TypeTXT, dns.ClassINET, dns.RcodeRefused, ""},
		{"google in class CH refused", "o-o.myaddr.l.google.com.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeRefused, ""},
		{"other name refused", "example.com.", dns.TypeA, dns.ClassINET, dns.RcodeRefused, ""},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tt := range tests {
			t.Run(network+"/"+tt.name, func(t *testing.T) {
				resp := query(t, network, s.Addr(), tt.qname, tt.qtype, tt.class)
				if resp.Rcode != tt.wantRcode {
					t.Errorf("rcode got %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tt.wantRcode])
				}
				if got := answerText(resp); got != tt.wantAnswer {
					t.Errorf("answer got %q, want %q", got, tt.wantAnswer)
				}
			})
		}
	}
}

// TestAnswerFunc proves answer() replaces the source IP, picks the record
// type by family, and that a nil answer refuses.
func TestAnswerFunc(t *testing.T) {
	v6 := start(t, "127.0.0.1:0", func(net.IP) net.IP { return net.ParseIP("2001:db8::7") })
	if got := answerText(query(t, "udp", v6.Addr(), "myip.opendns.com.", dns.TypeAAAA, dns.ClassINET)); got != "2001:db8::7" {
		t.Errorf("AAAA got %q, want 2001:db8::7", got)
	}
	if got := answerText(query(t, "udp", v6.Addr(), "myip.opendns.com.", dns.TypeA, dns.ClassINET)); got != "" {
		t.Errorf("A for a v6 answer got %q, want no data", got)
	}
	if got := answerText(query(t, "udp", v6.Addr(), "whoami.cloudflare.", dns.TypeTXT, dns.ClassCHAOS)); got != "2001:db8::7" {
		t.Errorf("TXT got %q, want 2001:db8::7", got)
	}
	var seen net.IP
	refuse := start(t, "127.0.0.1:0", func(remote net.IP) net.IP { seen = remote; return nil })
	if resp := query(t, "tcp", refuse.Addr(), "myip.opendns.com.", dns.TypeA, dns.ClassINET); resp.Rcode != dns.RcodeRefused {
		t.Errorf("nil answer rcode got %s, want REFUSED", dns.RcodeToString[resp.Rcode])
	}
	if !seen.Equal(net.IPv4(127, 0, 0, 1)) || len(seen) != 4 {
		t.Errorf("answer got remote %v (len %d), want 127.0.0.1 in 4-byte form", seen, len(seen))
	}
}

// TestIPv6Loopback proves a v6 querier gets AAAA with its own address.
func TestIPv6Loopback(t *testing.T) {
	s, err := Start("[::1]:0", nil, nil)
	if err != nil {
		t.Skipf("SKIP: no IPv6 loopback here: %v", err)
	}
	defer s.Close()
	if got := answerText(query(t, "udp", s.Addr(), "myip.opendns.com.", dns.TypeAAAA, dns.ClassINET)); got != "::1" {
		t.Errorf("AAAA got %q, want ::1", got)
	}
}

// TestSamePortAndClose proves UDP and TCP share the port of Addr, a fixed
// port works, Close twice is harmless and the port is free afterwards.
func TestSamePortAndClose(t *testing.T) {
	var logs bytes.Buffer
	s, err := Start("127.0.0.1:0", nil, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	query(t, "tcp", addr, "myip.opendns.com.", dns.TypeA, dns.ClassINET)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	again, err := Start(addr, nil, nil)
	if err != nil {
		t.Fatalf("restart on %s after Close: %v", addr, err)
	}
	again.Close()
	if !strings.Contains(logs.String(), addr) {
		t.Errorf("log does not name the address %s: %s", addr, logs.String())
	}
	if _, err := Start("127.0.0.1", nil, nil); err == nil {
		t.Errorf("Start without a port: got no error")
	}
}
