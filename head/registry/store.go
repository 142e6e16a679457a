package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

const stateVersion = 1

func load(path string) (*snapshot, error) {
	if path == "" {
		return &snapshot{}, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &snapshot{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var s snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse state %s: %w", path, err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("state %s: version %d not supported", path, s.Version)
	}
	return &s, nil
}

// saveLocked writes the whole state atomically. Caller holds mu.
func (r *Registry) saveLocked() error {
	if r.cfg.Path == "" {
		return nil
	}
	s := snapshot{Version: stateVersion, Serials: r.serials}
	for _, c := range r.candidates {
		s.Candidates = append(s.Candidates, c)
	}
	for _, n := range r.nodes {
		s.Nodes = append(s.Nodes, n)
	}
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	if err := WriteFileAtomic(r.cfg.Path, b, 0o600); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// WriteFileAtomic replaces path with data so a crash leaves either the old
// or the new file, never a mix: temp file in the same dir, fsync, rename,
// fsync the dir.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
