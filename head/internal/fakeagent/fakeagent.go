// Package fakeagent plays a candidate for the head's tests, written from
// docs/protocol.md §6 alone (not from the real agent): 64 listeners that answer the port
// check, an HTTP client whose source address is the candidate's public IP
// (127.0.0.x in tests), and an enroll request with every check passing.
package fakeagent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// Mode is how the listeners answer the port check.
type Mode int

const (
	Answer Mode = iota // the right HMAC
	Silent             // accept and say nothing
	Wrong              // a well-formed but wrong HMAC
)

// Agent is one fake candidate.
type Agent struct {
	IP      string
	Ports   []int
	PortKey []byte
	mode    Mode
	lns     []net.Listener
	wg      sync.WaitGroup

	challenged     chan struct{}
	challengedOnce sync.Once
}

// Start opens 64 listeners on ip with ephemeral ports.
func Start(ip string, mode Mode) (*Agent, error) {
	a := &Agent{IP: ip, mode: mode, PortKey: make([]byte, 32), challenged: make(chan struct{})}
	if _, err := rand.Read(a.PortKey); err != nil {
		return nil, err
	}
	for range wire.PortCount {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("listen %s: %w", ip, err)
		}
		a.lns = append(a.lns, ln)
		port := ln.Addr().(*net.TCPAddr).Port
		a.Ports = append(a.Ports, port)
		a.wg.Add(1)
		go a.serve(ln, port)
	}
	return a, nil
}

// Close stops the listeners.
func (a *Agent) Close() {
	for _, ln := range a.lns {
		ln.Close()
	}
	a.wg.Wait()
}

func (a *Agent) serve(ln net.Listener, port int) {
	defer a.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go a.answer(c, port)
	}
}

func (a *Agent) answer(c net.Conn, port int) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(c, 128)).ReadString('\n')
	if err != nil {
		return
	}
	nonce, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "RAYVAST-PORTCHECK ")
	if !ok {
		return
	}
	a.challengedOnce.Do(func() { close(a.challenged) })
	switch a.mode {
	case Silent:
		time.Sleep(3 * time.Second)
		return
	case Wrong:
		nonce += "x"
	}
	mac := hmac.New(sha256.New, a.PortKey)
	fmt.Fprintf(mac, "%s:%d", nonce, port)
	fmt.Fprintf(c, "%s\n", hex.EncodeToString(mac.Sum(nil)))
}

// Challenged is closed once the head's port check has sent a challenge to
// any of the listeners: a test's signal that an enrollment is in its check.
func (a *Agent) Challenged() <-chan struct{} { return a.challenged }

// What Request reports: a Ray with token auth, a current Python, and
// GPUModel for each GPU.
const (
	RayVersion    = "2.53.0"
	PythonVersion = "3.11.7"
	GPUModel      = "NVIDIA A100-SXM4-80GB"
)

// Models is GPUModel n times.
func Models(n int) []string {
	m := make([]string, n)
	for i := range m {
		m[i] = GPUModel
	}
	return m
}

// Request is an enroll request with every check passing.
func (a *Agent) Request(instanceID, token string, gpus int) wire.EnrollRequest {
	ok := wire.Check{OK: true, Detail: "ok"}
	return wire.EnrollRequest{
		Version: wire.Version, InstanceID: instanceID, JoinToken: token,
		Checks: wire.Checks{Capabilities: ok, Netns: ok, Shm: ok,
			Egress: wire.EgressCheck{OK: true, Detail: "ok", IP: a.IP}},
		GPUs: gpus, GPUModels: Models(gpus),
		RayVersion: RayVersion, PythonVersion: PythonVersion,
		Ports:   append([]int(nil), a.Ports...),
		PortKey: base64.StdEncoding.EncodeToString(a.PortKey),
	}
}

// Client is an HTTPS client that trusts only ca, dials from sourceIP, and
// presents cert when it is not nil.
func Client(sourceIP string, ca *x509.CertPool, cert *tls.Certificate) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(sourceIP)}, Timeout: 5 * time.Second}
	tc := &tls.Config{RootCAs: ca, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:     d.DialContext,
			TLSClientConfig: tc,
		},
	}
}

// Post sends v as JSON (or raw bytes when v is []byte) and returns the
// status and body.
func Post(ctx context.Context, c *http.Client, url string, v any) (int, []byte, error) {
	st, b, _, err := PostFull(ctx, c, url, v)
	return st, b, err
}

// PostFull is Post that also returns the answer's headers.
func PostFull(ctx context.Context, c *http.Client, url string, v any) (int, []byte, http.Header, error) {
	body, ok := v.([]byte)
	if !ok {
		var err error
		if body, err = json.Marshal(v); err != nil {
			return 0, nil, nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// KeyPair parses the cert and key of an enroll answer.
func KeyPair(resp wire.EnrollResponse) (tls.Certificate, error) {
	return tls.X509KeyPair([]byte(resp.NodeCert), []byte(resp.NodeKey))
}
