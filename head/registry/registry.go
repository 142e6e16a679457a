// Package registry is the head's durable state: candidates, nodes and the
// certificate serials issued to them (docs/protocol.md §6–§8). Every change that matters
// after a restart is committed to a bbolt store (store.go) before the call
// returns; the disk write runs outside the mutex that reads and heartbeats
// take, and a failed write changes nothing in memory. Join tokens and port
// keys are kept only as SHA-256 hashes. Heartbeat details and health live in
// memory: a restarted head gives every node a fresh grace period instead.
package registry

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
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

// RetryWindow is how long after consuming a token the same agent (same
// token, same port_key, same source IP) may retry a lost answer (docs/protocol.md §6
// step 2 Retries).
const RetryWindow = 10 * time.Minute

// DefaultRetention is how long ended candidates stay listed before Prune
// drops them.
const DefaultRetention = 7 * 24 * time.Hour

// Config builds a Registry.
type Config struct {
	Path string // the store (bbolt file); "" keeps state in memory only
	// LegacyPath is a v1 state.json migrated into a new store, then renamed
	// to LegacyPath.migrated.
	LegacyPath string
	// StoreID is the id this state dir's store was made with (recorded in
	// head.json once the head has served); "" for a state dir that never
	// served. A store that is missing, empty or another's fails Open with
	// ErrNoStore instead of starting as a new cluster.
	StoreID string
	Now     func() time.Time
	Rand    io.Reader
	Log     *slog.Logger
	// Hook, if set, is called at named points of every change
	// ("claim:before-write", "claim:after-write", "slot", "end:…", …): the
	// crash tests stop the head there.
	Hook func(point string)
}

// Registry is safe for concurrent use.
type Registry struct {
	cfg     Config
	store   *store
	storeID string

	mu         sync.Mutex
	candidates map[string]*candidate // by candidate id
	byInstance map[string]string     // instance id -> live candidate id (or one being created)
	nodes      map[string]*wire.Node // by instance id
	serials    []IssuedSerial
	lastSeen   map[string]time.Time     // by instance id, in memory
	inFlight   map[string]string        // candidate id -> node type, claims holding a slot or not
	slotHeld   map[string]bool          // candidate id -> claim holds a slot
	resumable  map[string]bool          // consumed, not completed, no enrollment running: a retry resumes
	writing    map[string]chan struct{} // candidate id -> closed when its write in flight ends
	pruned     int64
}

type candidate struct {
	wire.Candidate
	TokenHash string `json:"token_hash,omitempty"` // hex SHA-256 of the unused token; empty once consumed or dead
	Consumed  bool   `json:"consumed,omitempty"`
	// The consumption, for retries of a lost answer; cleared when the
	// candidate ends.
	ConsumedHash string    `json:"consumed_token_hash,omitempty"`
	PortKeyHash  string    `json:"port_key_hash,omitempty"`
	ConsumedAt   time.Time `json:"consumed_at,omitzero"`
}

// IssuedSerial records one node certificate.
type IssuedSerial struct {
	InstanceID string    `json:"instance_id"`
	Serial     string    `json:"serial"`
	IssuedAt   time.Time `json:"issued_at"`
}

// Open loads the store, or makes it (migrating a v1 state.json) when the
// state dir never served. A candidate whose token was consumed by an
// enrollment the head did not finish may resume within RetryWindow of the
// consumption (the agent retries); older ones are marked destroy_requested.
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
		byInstance: map[string]string{},
		nodes:      map[string]*wire.Node{},
		lastSeen:   map[string]time.Time{},
		inFlight:   map[string]string{},
		slotHeld:   map[string]bool{},
		resumable:  map[string]bool{},
		writing:    map[string]chan struct{}{},
	}
	if cfg.Path == "" {
		return r, nil
	}
	snap, err := r.openStore()
	if err != nil {
		return nil, err
	}
	if err := r.restore(snap); err != nil {
		r.store.close()
		return nil, err
	}
	return r, nil
}

// openStore opens (or makes) the store and checks it is this state dir's.
func (r *Registry) openStore() (*snapshot, error) {
	st, err := openStore(r.cfg.Path, r.cfg.StoreID != "")
	if err != nil {
		return nil, err
	}
	id, err := st.storeID()
	if err == nil && id == "" && r.cfg.StoreID == "" {
		id, err = r.createStore(st)
	}
	if err == nil && r.cfg.StoreID != "" && id != r.cfg.StoreID {
		err = fmt.Errorf("open state %s: %w: holds store %q, the state dir served with %q", r.cfg.Path, ErrNoStore, id, r.cfg.StoreID)
	}
	var snap *snapshot
	if err == nil {
		snap, err = st.load()
	}
	if err != nil {
		st.close()
		return nil, err
	}
	if err := retireLegacy(r.cfg.LegacyPath); err != nil {
		r.cfg.Log.Warn("v1 state migrated but not renamed", "path", r.cfg.LegacyPath, "err", err)
	}
	r.store, r.storeID = st, id
	return snap, nil
}

func (r *Registry) createStore(st *store) (string, error) {
	v1, err := readLegacy(r.cfg.LegacyPath)
	if err != nil {
		return "", err
	}
	b := make([]byte, 16)
	if _, err := io.ReadFull(r.cfg.Rand, b); err != nil {
		return "", fmt.Errorf("new store id: %w", err)
	}
	id := hex.EncodeToString(b)
	if err := st.create(id, v1); err != nil {
		return "", fmt.Errorf("create state %s: %w", r.cfg.Path, err)
	}
	if v1 != nil {
		r.cfg.Log.Info("migrated v1 state", "from", r.cfg.LegacyPath, "candidates", len(v1.Candidates), "nodes", len(v1.Nodes))
	}
	return id, nil
}

// restore fills memory from the snapshot and settles enrollments the last
// head left unfinished.
func (r *Registry) restore(snap *snapshot) error {
	now := r.cfg.Now()
	var expired []*candidate
	for _, c := range snap.Candidates {
		r.candidates[c.CandidateID] = c
		if c.InstanceID != "" && wire.Live(c.State) {
			r.byInstance[c.InstanceID] = c.CandidateID
		}
		if c.Consumed && wire.Live(c.State) && c.State != wire.StateEnrolled && c.State != wire.StateLost {
			if now.Sub(c.ConsumedAt) < RetryWindow {
				r.resumable[c.CandidateID] = true
				continue
			}
			n := *c
			n.State, n.Reason, n.UpdatedAt = wire.StateDestroyRequested, "enrollment_interrupted", now.UTC()
			n.ConsumedHash, n.PortKeyHash = "", ""
			expired = append(expired, &n)
		}
	}
	for _, n := range snap.Nodes {
		n.Health, n.HealthFailures = wire.HealthUnknown, 0
		r.nodes[n.InstanceID] = n
		r.lastSeen[n.InstanceID] = now
	}
	r.serials = snap.Serials
	sort.Slice(r.serials, func(i, j int) bool { return r.serials[i].IssuedAt.Before(r.serials[j].IssuedAt) })
	if len(expired) == 0 {
		return nil
	}
	if err := r.store.write(func(w writer) error {
		for _, c := range expired {
			if err := w.putCandidate(c); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, c := range expired {
		r.candidates[c.CandidateID] = c
		delete(r.byInstance, c.InstanceID)
	}
	return nil
}

// StoreID is the id of the store ("" in memory): the caller records it in
// the state dir so a store that vanishes later is noticed.
func (r *Registry) StoreID() string { return r.storeID }

// Close closes the store.
func (r *Registry) Close() error { return r.store.close() }

// HashToken is the at-rest form of a join token.
func HashToken(tok secret.String) string {
	sum := sha256.Sum256([]byte(tok.Reveal()))
	return hex.EncodeToString(sum[:])
}

// HashPortKey is the at-rest form of a port_key.
func HashPortKey(key secret.Bytes) string {
	sum := sha256.Sum256(key.Reveal())
	return hex.EncodeToString(sum[:])
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
	out := make([]wire.Candidate, 0, len(r.candidates))
	for _, c := range r.candidates {
		out = append(out, c.Candidate)
	}
	r.mu.Unlock()
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
	out := make([]wire.Node, 0, len(r.nodes))
	for _, n := range r.nodes {
		out = append(out, copyNode(n))
	}
	r.mu.Unlock()
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
	c.Ports = slices.Clone(n.Ports)
	if n.LastHeartbeat != nil {
		t := *n.LastHeartbeat
		c.LastHeartbeat = &t
	}
	if n.Ray.ExitCode != nil {
		e := *n.Ray.ExitCode
		c.Ray.ExitCode = &e
	}
	if n.RayReport != nil {
		r := *n.RayReport
		c.RayReport = &r
	}
	return c
}

// Serials lists every node certificate serial issued, oldest first.
func (r *Registry) Serials() []IssuedSerial {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]IssuedSerial(nil), r.serials...)
}

// constantTimeHashEqual compares two hex hashes of equal length in constant time.
func constantTimeHashEqual(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
