// Package guestapi is the node agent's guest API server (docs/protocol.md §9, seed 002):
// Version, Health, Info and GetAttestationForAppKey on the v0/v1 pRPC
// surfaces, the dashboard, logs and metrics, over TCP (HTTPS with the node
// cert when the node has one), vsock, and an unauthenticated Unix socket that
// adds GetKey. Every access decision is internal/guestauth's; this package
// routes exactly the route it was handed.
package guestapi

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// Config builds a Server. The first block is what the agent gets from the
// enroll bundle (or the standalone app file), the rest is optional.
type Config struct {
	AppID      string
	AppRootKey secret.Bytes // 32 bytes
	// The measured switches, fixed at launch.
	PublicLogs    bool
	PublicSysinfo bool
	PublicTCBInfo bool
	// Policy is the host's: anonymous scopes and external issuers.
	Policy wire.GuestAPIPolicy

	// Node identity (all three or none). With it the TCP surface serves
	// HTTPS with the node cert and GetAttestationForAppKey answers.
	NodeCertPEM []byte       // the node cert; further certs in it are kept as its chain
	NodeKeyPEM  secret.Bytes // PKCS#8 (or SEC1) ECDSA key
	CACertPEM   []byte       // the cluster CA, appended to the attested chain

	// Logs served at /logs/<name>; names must be table rows ("agent", "ray").
	// LogFiles are paths, merged into Logs.
	LogFiles map[string]string
	Logs     map[string]LogSource

	// TrustedIP is the head's address: its health polls keep room of their
	// own in the connection limits (see Limits). Invalid = none (standalone).
	TrustedIP netip.Addr
	Limits    Limits // zero fields: MaxConns, PerIPConns, UnauthHeaderTimeout

	Processes func() []Process     // the process table (guest:containers); nil = none
	TCB       func() wire.GuestTCB // Info's tcb block; called only when public_tcbinfo is on and Info is shown
	Version   string               // the agent's version; "" = "dev"
	Root      string               // host root for /proc (sysinfo, GPUs); "" = "/"
	NvidiaSMI string               // nvidia-smi's path; "" = look it up in PATH, "-" = never run it
	Rand      io.Reader            // ECDSA signing randomness; nil = crypto/rand
	Now       func() time.Time
	Log       *slog.Logger
}

// Process is one row of the dashboard's process table.
type Process struct {
	Name     string
	PID      int
	State    string
	Restarts int
}

// Server is a guest API server. Serve it on as many listeners as needed.
type Server struct {
	cfg      Config
	auth     *guestauth.Authorizer
	switches guestauth.Switches
	appKey   ed25519.PublicKey
	id       *identity // nil without node identity
	logs     map[string]LogSource
	started  time.Time
	gpus     *gpuSource

	mu      sync.Mutex
	servers []*http.Server
}

// New validates cfg and builds a server. It refuses to build on an unknown
// scope name, a bad issuer key, an app root key of the wrong size, a bad node
// identity or a log name the route table does not know.
func New(cfg Config) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	auth, err := guestauth.NewAuthorizer(guestauth.Config{AppID: cfg.AppID, AppRootKey: cfg.AppRootKey, Policy: cfg.Policy})
	if err != nil {
		return nil, fmt.Errorf("guest api: %w", err)
	}
	appKey, err := guestauth.DeriveEd25519(cfg.AppRootKey.Reveal(), guestauth.AppKeyInfo)
	if err != nil {
		return nil, fmt.Errorf("guest api: app key: %w", err)
	}
	s := &Server{
		cfg:  cfg,
		auth: auth,
		switches: guestauth.Switches{PublicLogs: cfg.PublicLogs, PublicSysinfo: cfg.PublicSysinfo,
			PublicTCBInfo: cfg.PublicTCBInfo},
		appKey:  appKey.Public().(ed25519.PublicKey),
		logs:    map[string]LogSource{},
		started: cfg.Now(),
		gpus:    &gpuSource{root: cfg.Root, smi: cfg.NvidiaSMI, now: cfg.Now},
	}
	if len(cfg.NodeCertPEM) > 0 || cfg.NodeKeyPEM.Len() > 0 {
		if s.id, err = newIdentity(cfg.NodeCertPEM, cfg.NodeKeyPEM.Reveal(), cfg.CACertPEM); err != nil {
			return nil, fmt.Errorf("guest api: node identity: %w", err)
		}
	}
	if err := s.mountLogs(); err != nil {
		return nil, fmt.Errorf("guest api: %w", err)
	}
	return s, nil
}

// mountLogs keeps the configured logs, but only when public_logs is on: with
// it off the log routes do not exist in this server at all.
func (s *Server) mountLogs() error {
	all := map[string]LogSource{}
	for name, path := range s.cfg.LogFiles {
		all[name] = LogFile(path)
	}
	for name, src := range s.cfg.Logs {
		all[name] = src
	}
	for name := range all {
		if _, ok := guestauth.Lookup("/logs/"+name, false); !ok {
			return fmt.Errorf("log %q: not a /logs route of the table", name)
		}
	}
	if s.cfg.PublicLogs {
		s.logs = all
	}
	return nil
}

// AppPublicKey is the hex public key GetAttestationForAppKey attests.
func (s *Server) AppPublicKey() string { return hex.EncodeToString(s.appKey) }

// HasIdentity reports whether the server holds a node cert and key.
func (s *Server) HasIdentity() bool { return s.id != nil }

var errNoIdentity = errors.New("no node identity")
