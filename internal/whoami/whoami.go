// Package whoami is a small "who am I" DNS responder: it answers the three
// question kinds the agent's egress check asks (docs/protocol.md §5) with the querier's
// source IP, over UDP and TCP on one port. Tests and the Docker provider run
// it so a candidate's egress check talks to a real DNS server without the
// internet.
package whoami

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/miekg/dns"
)

// The names the three resolver kinds ask, fully qualified.
const (
	OpenDNSName    = "myip.opendns.com."        // A/AAAA, class IN
	GoogleName     = "o-o.myaddr.l.google.com." // TXT, class IN
	CloudflareName = "whoami.cloudflare."       // TXT, class CH
)

// Server answers who-am-I questions on one UDP and one TCP socket.
type Server struct {
	addr    string
	udp     *dns.Server
	tcp     *dns.Server
	closeMu sync.Once
}

// Start listens on addr (ip:port; port 0 picks a free port shared by UDP and
// TCP) and serves until Close. answer maps the querier's source IP to the IP
// to report; nil reports the source IP itself, and an answer of nil refuses.
func Start(addr string, answer func(remote net.IP) net.IP, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if answer == nil {
		answer = func(remote net.IP) net.IP { return remote }
	}
	pc, ln, err := listenPair(addr)
	if err != nil {
		return nil, err
	}
	h := &handler{answer: answer, log: log}
	s := &Server{
		addr: pc.LocalAddr().String(),
		udp:  &dns.Server{PacketConn: pc, Handler: h},
		tcp:  &dns.Server{Listener: ln, Handler: h},
	}
	// Wait until both serve: Shutdown of a server not yet started fails.
	var started sync.WaitGroup
	started.Add(2)
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		srv.NotifyStartedFunc = started.Done
		go func() {
			if err := srv.ActivateAndServe(); err != nil {
				log.Error("whoami serve", "addr", s.addr, "err", err)
			}
		}()
	}
	started.Wait()
	log.Info("whoami listening", "addr", s.addr)
	return s, nil
}

// listenPair opens UDP and TCP on the same port. With port 0 the TCP port
// may already be taken by someone else, so it retries with a new UDP port.
func listenPair(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("whoami listen %s: %w", addr, err)
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	var lastErr error
	for range tries {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("whoami listen udp %s: %w", addr, err)
		}
		_, got, _ := net.SplitHostPort(pc.LocalAddr().String())
		ln, err := net.Listen("tcp", net.JoinHostPort(host, got))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
	}
	return nil, nil, fmt.Errorf("whoami listen tcp %s: %w", addr, lastErr)
}

// Addr is the ip:port both sockets listen on.
func (s *Server) Addr() string { return s.addr }

// Close stops both listeners.
func (s *Server) Close() error {
	var err error
	s.closeMu.Do(func() {
		err = errors.Join(s.udp.Shutdown(), s.tcp.Shutdown())
	})
	return err
}

type handler struct {
	answer func(net.IP) net.IP
	log    *slog.Logger
}

func (h *handler) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := h.reply(remoteIP(w.RemoteAddr()), req)
	if err := w.WriteMsg(resp); err != nil {
		h.log.Debug("whoami write", "remote", w.RemoteAddr().String(), "err", err)
	}
}

// reply builds the answer to req from a querier at remote.
func (h *handler) reply(remote net.IP, req *dns.Msg) *dns.Msg {
	resp := new(dns.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 {
		resp.Rcode = dns.RcodeRefused
		return resp
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	known := (name == OpenDNSName || name == GoogleName) && q.Qclass == dns.ClassINET ||
		name == CloudflareName && q.Qclass == dns.ClassCHAOS
	if !known {
		resp.Rcode = dns.RcodeRefused
		return resp
	}
	ip := h.answer(remote)
	h.log.Debug("whoami query", "remote", remote.String(), "name", name, "type", dns.TypeToString[q.Qtype], "answer", ip.String())
	if ip == nil {
		resp.Rcode = dns.RcodeRefused
		return resp
	}
	hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: q.Qclass, Ttl: 0}
	switch {
	case name == OpenDNSName && q.Qtype == dns.TypeA && ip.To4() != nil:
		resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: ip.To4()})
	case name == OpenDNSName && q.Qtype == dns.TypeAAAA && ip.To4() == nil:
		resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip.To16()})
	case name != OpenDNSName && q.Qtype == dns.TypeTXT:
		resp.Answer = append(resp.Answer, &dns.TXT{Hdr: hdr, Txt: []string{ip.String()}})
	}
	// Anything else about a known name: NOERROR with no answer (NODATA),
	// as the real servers do for the other address family.
	return resp
}

// remoteIP is the source IP of a UDP or TCP peer, v4 in 4-byte form.
func remoteIP(a net.Addr) net.IP {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.TCPAddr:
		ip = a.IP
	default:
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return nil
		}
		ip = net.ParseIP(host)
	}
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}
