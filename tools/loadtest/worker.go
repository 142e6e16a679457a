package main

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/portcheck"
	"github.com/rayvast/rayvast/internal/wire"
)

// simNode is one simulated candidate: its own loopback IP, 64 port-check
// listeners until it enrolled, then one kept-alive mTLS connection.
type simNode struct {
	node
	key  []byte
	lns  *portcheck.Listeners
	cert tls.Certificate
	// hb holds one client per heartbeat target, kept across phases: the
	// warm-up phase makes the TLS handshakes, so a measured phase times
	// heartbeats on open connections and not 1,000 handshakes at once.
	hb map[string]*http.Client
}

type worker struct {
	nodes []*simNode
	pool  *x509.CertPool
	headA string
}

// runWorker serves the coordinator's commands until quit.
func runWorker() int {
	raiseNoFile()
	c := newLineConn(os.Stdin, os.Stdout)
	w := &worker{}
	for {
		var cmd command
		if err := c.recv(&cmd); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		var res result
		switch cmd.Op {
		case "init":
			res = w.init(cmd)
		case "enroll":
			res = w.enroll(cmp.Or(cmd.Target, w.headA))
		case "hb":
			res = w.heartbeats(cmd.Target, cmd.Alt, cmd.Rate, time.Duration(cmd.Secs*float64(time.Second)))
		case "quit":
			return 0
		default:
			res.Err = "unknown op " + cmd.Op
		}
		if err := c.send(res); err != nil {
			return 1
		}
	}
}

func (w *worker) init(cmd command) result {
	w.pool = x509.NewCertPool()
	if !w.pool.AppendCertsFromPEM([]byte(cmd.CAPEM)) {
		return result{Err: "bad ca pem"}
	}
	w.headA = cmd.HeadA
	for _, n := range cmd.Nodes {
		s := &simNode{node: n, key: make([]byte, 32)}
		rand.Read(s.key)
		// The agent's own listeners (internal/portcheck), so the far side of
		// each check costs what a real agent's does.
		lns, err := portcheck.Listen(n.IP, simPorts, s.key, nil)
		if err != nil {
			return result{Err: fmt.Sprintf("listen %s: %v", n.IP, err)}
		}
		s.lns = lns
		w.nodes = append(w.nodes, s)
	}
	return result{}
}

// simPorts are every node's 64 ports: the same numbers on each node's own
// loopback IP.
var simPorts = func() []int {
	p := make([]int, wire.PortCount)
	for i := range p {
		p[i] = 20000 + i
	}
	return p
}()

func (s *simNode) request() wire.EnrollRequest {
	ok := wire.Check{OK: true, Detail: "ok"}
	req := wire.EnrollRequest{Version: wire.Version, InstanceID: s.Instance, JoinToken: s.Token,
		Checks:     wire.Checks{Capabilities: ok, Netns: ok, Shm: ok, Egress: wire.EgressCheck{OK: true, Detail: "ok", IP: s.IP}},
		RayVersion: "2.53.0", PythonVersion: "3.11.7",
		PortKey: base64.StdEncoding.EncodeToString(s.key)}
	req.Ports = simPorts
	return req
}

func client(ip string, pool *x509.CertPool, cert *tls.Certificate, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: tc,
		MaxIdleConnsPerHost: 1, IdleConnTimeout: 5 * time.Minute, ForceAttemptHTTP2: false}}
}

// enroll has every node POST /enroll to target (port A or the bare
// server) at once, each retrying a network error or 5xx with the same
// request as the agent does; listeners close after.
func (w *worker) enroll(target string) result {
	var mu sync.Mutex
	var res result
	var wg sync.WaitGroup
	start := time.Now()
	for _, s := range w.nodes {
		wg.Go(func() {
			body, _ := json.Marshal(s.request())
			hc := client(s.IP, w.pool, nil, 60*time.Second)
			var err error
			for try := 0; try < 5; try++ {
				if err = s.enrollOnce(hc, "https://"+target+"/enroll", body); err == nil || strings.Contains(err.Error(), "status 4") {
					break
				}
				mu.Lock()
				res.Retries++
				mu.Unlock()
				time.Sleep(time.Second)
			}
			lat := time.Since(start)
			s.lns.Close()
			mu.Lock()
			defer mu.Unlock()
			res.add(lat, err)
		})
	}
	wg.Wait()
	return res
}

func (s *simNode) enrollOnce(hc *http.Client, url string, body []byte) error {
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d %s", resp.StatusCode, b)
	}
	var out wire.EnrollResponse
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	cert, err := tls.X509KeyPair([]byte(out.NodeCert), []byte(out.NodeKey))
	if err != nil {
		return err
	}
	s.cert = cert
	return nil
}
