package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rayvast/rayvast/internal/wire"
)

// The store is a bbolt file (one key per candidate, node and serial), so a
// change costs one small B+tree update however large the fleet is. Writes go
// through db.Batch: concurrent requests share one commit (one fsync) instead
// of queueing one fsync each.
var (
	bucketMeta       = []byte("meta")
	bucketCandidates = []byte("candidates")
	bucketNodes      = []byte("nodes")
	bucketSerials    = []byte("serials")
	keyStoreID       = []byte("store_id")
	keyVersion       = []byte("version")
)

const storeVersion = "2"

// batchDelay is how long a write waits for others to share its commit. A
// commit's fsync takes milliseconds anyway; 2 ms keeps a lone write quick.
const batchDelay = 2 * time.Millisecond

type store struct {
	db   *bolt.DB
	fail func() error // tests: a disk that refuses writes
}

// ErrNoStore is returned by Open with Config.MustExist when the store file is
// missing or holds no state.
var ErrNoStore = errors.New("state store missing or empty")

func openStore(path string, mustExist bool) (*store, error) {
	if _, err := os.Stat(path); mustExist && errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open state %s: %w", path, ErrNoStore)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	db.MaxBatchDelay = batchDelay
	return &store{db: db}, nil
}

// storeID reads the id the store was made with ("" for a new, empty file).
func (s *store) storeID() (string, error) {
	var id string
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta); b != nil {
			id = string(b.Get(keyStoreID))
		}
		return nil
	})
	return id, err
}

// create makes the buckets and records id; the v1 snapshot, if any, goes in
// the same transaction, so a crash leaves either nothing or all of it.
func (s *store) create(id string, v1 *snapshot) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketCandidates, bucketNodes, bucketSerials} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		m, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v1 != nil {
			w := writer{tx}
			for _, c := range v1.Candidates {
				if err := w.putCandidate(c); err != nil {
					return err
				}
			}
			for _, n := range v1.Nodes {
				if err := w.putNode(n); err != nil {
					return err
				}
			}
			for _, sr := range v1.Serials {
				if err := w.putSerial(sr); err != nil {
					return err
				}
			}
		}
		if err := m.Put(keyVersion, []byte(storeVersion)); err != nil {
			return err
		}
		return m.Put(keyStoreID, []byte(id))
	})
}

func (s *store) load() (*snapshot, error) {
	snap := &snapshot{}
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := string(tx.Bucket(bucketMeta).Get(keyVersion)); v != storeVersion {
			return fmt.Errorf("store version %q not supported", v)
		}
		each := func(bucket []byte, f func(v []byte) error) error {
			return tx.Bucket(bucket).ForEach(func(_, v []byte) error { return f(v) })
		}
		return errors.Join(
			each(bucketCandidates, func(v []byte) error {
				c := &candidate{}
				snap.Candidates = append(snap.Candidates, c)
				return json.Unmarshal(v, c)
			}),
			each(bucketNodes, func(v []byte) error {
				n := &wire.Node{}
				snap.Nodes = append(snap.Nodes, n)
				return json.Unmarshal(v, n)
			}),
			each(bucketSerials, func(v []byte) error {
				var sr IssuedSerial
				err := json.Unmarshal(v, &sr)
				snap.Serials = append(snap.Serials, sr)
				return err
			}))
	})
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	return snap, nil
}

// write runs f in a shared (batched) transaction. f may run more than once
// (bbolt retries the others of a batch one failed), so it only puts and
// deletes. On error nothing of f is on disk.
func (s *store) write(f func(w writer) error) error {
	if s == nil {
		return nil
	}
	if s.fail != nil {
		if err := s.fail(); err != nil {
			return fmt.Errorf("save state: %w", err)
		}
	}
	if err := s.db.Batch(func(tx *bolt.Tx) error { return f(writer{tx}) }); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

func (s *store) close() error {
	if s == nil {
		return nil
	}
	return s.db.Close()
}

// writer puts and deletes records inside one transaction.
type writer struct{ tx *bolt.Tx }

func (w writer) put(bucket []byte, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.tx.Bucket(bucket).Put([]byte(key), b)
}

func (w writer) putCandidate(c *candidate) error { return w.put(bucketCandidates, c.CandidateID, c) }
func (w writer) putNode(n *wire.Node) error      { return w.put(bucketNodes, n.InstanceID, n) }
func (w writer) putSerial(s IssuedSerial) error {
	return w.put(bucketSerials, s.InstanceID+"/"+s.Serial, s)
}

func (w writer) deleteCandidate(id string) error {
	return w.tx.Bucket(bucketCandidates).Delete([]byte(id))
}
func (w writer) deleteNode(id string) error { return w.tx.Bucket(bucketNodes).Delete([]byte(id)) }
func (w writer) deleteSerial(s IssuedSerial) error {
	return w.tx.Bucket(bucketSerials).Delete([]byte(s.InstanceID + "/" + s.Serial))
}
