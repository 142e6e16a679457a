// Package atomicfile replaces a file so that a reader, or the machine after
// a crash, sees the old file or the whole new one, never a part; and a
// secret never exists with looser permissions than it ends with.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data and mode, in the one safe order: a temp
// file in the same directory (created 0600), the data, the mode, fsync,
// rename over path, fsync the directory (so the rename itself survives a
// crash).
func Write(path string, data []byte, mode os.FileMode) error {
	if err := write(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func write(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := fill(f, data, mode); err != nil {
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

// fill writes the data while the file is still 0600, then sets the mode
// and syncs both to disk.
func fill(f *os.File, data []byte, mode os.FileMode) error {
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	return f.Sync()
}
