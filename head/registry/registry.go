// Package registry is the head's durable state: candidates, nodes and the
// certificate serials issued to them (SPEC §6–§8). Every change that matters
// after a restart is written to one JSON file atomically (temp file, fsync,
// rename, fsync dir) before the call returns. Join tokens are kept only as
// SHA-256 hashes. Heartbeat details and health live in memory: a restarted
// head gives every node a fresh grace period instead.
package registry

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// Errors callers map to status codes.
var (
	ErrNotFound = errors.New("no such candidate")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
)

// RefusalError is a refusal before a valid token (decision step 2). Reason is
// for the log and metrics only; the client always gets the same bytes.
type RefusalError struct{ Reason string }

func (e *RefusalError) Error() string { return "refused: " + e.Reason }

// Refusal reasons.
const (
	RefuseUnknown  = "unknown_instance"
	RefuseEnded    = "ended"
	RefuseSourceIP = "source_ip"
	RefuseToken    = "token"
	RefuseEnrolled = "already_enrolled"
	RefuseInFlight = "in_flight"
)

// Config builds a Registry.
type Config struct {
	Path string // state file; "" keeps state in memory only
	Now  func() time.Time
	Rand io.Reader
	Log  *slog.Logger
}

// Registry is safe for concurrent use.
type Registry struct {
	cfg Config

	mu         sync.Mutex
	candidates map[string]*candidate // by candidate id
	nodes      map[string]*wire.Node // by instance id
	serials    []IssuedSerial
	lastSeen   map[string]time.Time // by instance id, in memory
	inFlight   map[string]string    // candidate id -> node type, claims holding a slot or not
	slotHeld   map[string]bool      // candidate id -> claim holds a slot
}

type candidate struct {
	wire.Candidate
	TokenHash string `json:"token_hash,omitempty"` // hex SHA-256; empty once the token is dead
	Consumed  bool   `json:"consumed,omitempty"`
}

// IssuedSerial records one node certificate.
type IssuedSerial struct {
	InstanceID string    `json:"instance_id"`
	Serial     string    `json:"serial"`
	IssuedAt   time.Time `json:"issued_at"`
}

type snapshot struct {
	Version    int            `json:"version"`
	Candidates []*candidate   `json:"candidates"`
	Nodes      []*wire.Node   `json:"nodes"`
	Serials    []IssuedSerial `json:"serials"`
}

// Open loads the state file if it exists. A candidate whose token was
// consumed by an enrollment the head did not finish before it stopped cannot
// enroll any more: it is marked destroy_requested.
func Open(cfg Config) (*Registry, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{
		cfg:        cfg,
		candidates: map[string]*candidate{},
		nodes:      map[string]*wire.Node{},
		lastSeen:   map[string]time.Time{},
		inFlight:   map[string]string{},
		slotHeld:   map[string]bool{},
	}
	snap, err := load(cfg.Path)
	if err != nil {
		return nil, err
	}
	now := cfg.Now()
	dirty := false
	for _, c := range snap.Candidates {
		r.candidates[c.CandidateID] = c
		if c.Consumed && isLive(c.State) && c.State != wire.StateEnrolled && c.State != wire.StateLost {
			c.State, c.Reason, c.UpdatedAt = wire.StateDestroyRequested, "enrollment_interrupted", now
			dirty = true
		}
	}
	for _, n := range snap.Nodes {
		n.Health, n.HealthFailures = wire.HealthUnknown, 0
		r.nodes[n.InstanceID] = n
		r.lastSeen[n.InstanceID] = now
	}
	r.serials = snap.Serials
	if dirty {
		if err := r.saveLocked(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func isLive(state string) bool {
	return state != wire.StateEnded && state != wire.StateDestroyRequested
}

// HashToken is the at-rest form of a join token.
func HashToken(tok secret.String) string {
	sum := sha256.Sum256([]byte(tok.Reveal()))
	return hex.EncodeToString(sum[:])
}

// NewCandidate records a candidate and returns it with its new join token
// (32 random bytes, base64url without padding). Only the token's hash is kept.
func (r *Registry) NewCandidate(req wire.CandidateRequest) (wire.Candidate, secret.String, error) {
	if req.InstanceID != "" && !wire.ValidInstanceID(req.InstanceID) {
		return wire.Candidate{}, secret.String{}, fmt.Errorf("%w: instance_id must be 1-64 of [A-Za-z0-9._-]", ErrInvalid)
	}
	if req.PublicIP != "" {
		if _, err := netip.ParseAddr(req.PublicIP); err != nil {
			return wire.Candidate{}, secret.String{}, fmt.Errorf("%w: public_ip is not an IP literal", ErrInvalid)
		}
	}
	raw := make([]byte, 32)
	if _, err := io.ReadFull(r.cfg.Rand, raw); err != nil {
		return wire.Candidate{}, secret.String{}, fmt.Errorf("new join token: %w", err)
	}
	tok := secret.New(base64.RawURLEncoding.EncodeToString(raw))
	idb := make([]byte, 8)
	if _, err := io.ReadFull(r.cfg.Rand, idb); err != nil {
		return wire.Candidate{}, secret.String{}, fmt.Errorf("new candidate id: %w", err)
	}
	now := r.cfg.Now().UTC()
	c := &candidate{
		Candidate: wire.Candidate{
			CandidateID: "c-" + hex.EncodeToString(idb), NodeType: req.NodeType,
			InstanceID: req.InstanceID, PublicIP: canonIP(req.PublicIP), HostID: req.HostID,
			CreatedAt: now, UpdatedAt: now,
		},
		TokenHash: HashToken(tok),
	}
	c.State = rentalState(c)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.InstanceID != "" && r.liveByInstance(c.InstanceID) != nil {
		return wire.Candidate{}, secret.String{}, fmt.Errorf("%w: instance_id already belongs to a live candidate", ErrConflict)
	}
	r.candidates[c.CandidateID] = c
	if err := r.saveLocked(); err != nil {
		delete(r.candidates, c.CandidateID)
		return wire.Candidate{}, secret.String{}, err
	}
	return c.Candidate, tok, nil
}

func canonIP(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().String()
	}
	return s
}

// rentalState is the state a not yet enrolled candidate has from what is known.
func rentalState(c *candidate) string {
	switch {
	case c.InstanceID != "" && c.PublicIP != "":
		return wire.StateRunning
	case c.InstanceID != "":
		return wire.StateRented
	default:
		return wire.StatePending
	}
}

// liveByInstance finds the live candidate holding instance id. Caller holds mu.
func (r *Registry) liveByInstance(id string) *candidate {
	for _, c := range r.candidates {
		if c.InstanceID == id && isLive(c.State) {
			return c
		}
	}
	return nil
}

// Patch sets fields of a candidate that are not yet set (SPEC §8 PATCH).
func (r *Registry) Patch(id string, p wire.CandidatePatch) (wire.Candidate, error) {
	if p.InstanceID != "" && !wire.ValidInstanceID(p.InstanceID) {
		return wire.Candidate{}, fmt.Errorf("%w: instance_id must be 1-64 of [A-Za-z0-9._-]", ErrInvalid)
	}
	if p.PublicIP != "" {
		if _, err := netip.ParseAddr(p.PublicIP); err != nil {
			return wire.Candidate{}, fmt.Errorf("%w: public_ip is not an IP literal", ErrInvalid)
		}
	}
	if !(p.DPHTotal >= 0 && p.DPHTotal < 1000) { // NaN fails both
		return wire.Candidate{}, fmt.Errorf("%w: dph_total must be 0-1000 $/h", ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.candidates[id]
	if c == nil {
		return wire.Candidate{}, ErrNotFound
	}
	if !isLive(c.State) {
		return wire.Candidate{}, fmt.Errorf("%w: candidate is %s", ErrConflict, c.State)
	}
	set := func(field, cur, v string) error {
		if v != "" && cur != "" && cur != v {
			return fmt.Errorf("%w: %s is already set", ErrConflict, field)
		}
		return nil
	}
	if err := errors.Join(set("instance_id", c.InstanceID, p.InstanceID), set("public_ip", c.PublicIP, canonIP(p.PublicIP)), set("host_id", c.HostID, p.HostID)); err != nil {
		return wire.Candidate{}, err
	}
	if p.InstanceID != "" && c.InstanceID == "" {
		if o := r.liveByInstance(p.InstanceID); o != nil {
			return wire.Candidate{}, fmt.Errorf("%w: instance_id already belongs to a live candidate", ErrConflict)
		}
	}
	old := *c
	if p.InstanceID != "" {
		c.InstanceID = p.InstanceID
	}
	if p.PublicIP != "" {
		c.PublicIP = canonIP(p.PublicIP)
	}
	if p.HostID != "" {
		c.HostID = p.HostID
	}
	if p.DPHTotal > 0 {
		c.DPHTotal = p.DPHTotal
	}
	if c.InstanceID != "" && c.RentedAt == nil {
		t := r.cfg.Now().UTC()
		c.RentedAt = &t // billing starts: the cost of the candidate counts from here
	}
	if c.State == wire.StatePending || c.State == wire.StateRented || c.State == wire.StateRunning {
		c.State = rentalState(c)
	}
	c.UpdatedAt = r.cfg.Now().UTC()
	if err := r.saveLocked(); err != nil {
		*c = old
		return wire.Candidate{}, err
	}
	return c.Candidate, nil
}

// End kills a candidate's token and ends its node, if any: heartbeats are
// refused from then on. Ending an ended candidate is not an error.
func (r *Registry) End(id, reason string) (wire.Candidate, error) {
	return r.finish(id, wire.StateEnded, reason)
}

// RequestDestroy kills the token and shows the candidate as
// destroy_requested, for an external provider to end.
func (r *Registry) RequestDestroy(id, reason string) (wire.Candidate, error) {
	return r.finish(id, wire.StateDestroyRequested, reason)
}

func (r *Registry) finish(id, state, reason string) (wire.Candidate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.candidates[id]
	if c == nil {
		return wire.Candidate{}, ErrNotFound
	}
	if c.State == wire.StateEnded || c.State == state {
		return c.Candidate, nil
	}
	c.State, c.TokenHash, c.UpdatedAt = state, "", r.cfg.Now().UTC()
	if reason != "" {
		c.Reason = reason
	}
	if n := r.nodes[c.InstanceID]; n != nil && n.CandidateID == c.CandidateID && state == wire.StateEnded {
		n.State = wire.StateEnded
	}
	return c.Candidate, r.saveLocked()
}

// Candidate returns one candidate.
func (r *Registry) Candidate(id string) (wire.Candidate, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.candidates[id]
	if c == nil {
		return wire.Candidate{}, false
	}
	return c.Candidate, true
}

// Candidates lists every candidate, oldest first.
func (r *Registry) Candidates() []wire.Candidate {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]wire.Candidate, 0, len(r.candidates))
	for _, c := range r.candidates {
		out = append(out, c.Candidate)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].CandidateID < out[j].CandidateID
	})
	return out
}

// Nodes lists every node, by instance id.
func (r *Registry) Nodes() []wire.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]wire.Node, 0, len(r.nodes))
	for _, n := range r.nodes {
		out = append(out, copyNode(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceID < out[j].InstanceID })
	return out
}

// Node returns one node by instance id.
func (r *Registry) Node(instanceID string) (wire.Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.nodes[instanceID]
	if n == nil {
		return wire.Node{}, false
	}
	return copyNode(n), true
}

func copyNode(n *wire.Node) wire.Node {
	c := *n
	if n.LastHeartbeat != nil {
		t := *n.LastHeartbeat
		c.LastHeartbeat = &t
	}
	if n.Ray.ExitCode != nil {
		e := *n.Ray.ExitCode
		c.Ray.ExitCode = &e
	}
	return c
}

// Serials lists every node certificate serial issued.
func (r *Registry) Serials() []IssuedSerial {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]IssuedSerial(nil), r.serials...)
}

// constantTimeHashEqual compares two hex hashes of equal length in constant time.
func constantTimeHashEqual(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
