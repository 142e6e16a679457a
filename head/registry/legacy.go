package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/rayvast/rayvast/internal/wire"
)

// The v1 state: one JSON file rewritten whole on every change. A head that
// finds one and no store migrates it on its first start.
const legacyVersion = 1

type snapshot struct {
	Version    int            `json:"version"`
	Candidates []*candidate   `json:"candidates"`
	Nodes      []*wire.Node   `json:"nodes"`
	Serials    []IssuedSerial `json:"serials"`
}

// readLegacy reads a v1 state file; nil, nil when there is none.
func readLegacy(path string) (*snapshot, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read v1 state: %w", err)
	}
	var s snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse v1 state %s: %w", path, err)
	}
	if s.Version != legacyVersion {
		return nil, fmt.Errorf("v1 state %s: version %d not supported", path, s.Version)
	}
	return &s, nil
}

// retireLegacy renames a migrated v1 file out of the way; it stays as a
// backup and is never read again.
func retireLegacy(path string) error {
	if path == "" {
		return nil
	}
	err := os.Rename(path, path+".migrated")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
