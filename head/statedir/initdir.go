package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// writeDir makes dir holding files so that a killed `head init` leaves
// nothing half-made: the files go into a temp sibling that is renamed onto
// dir (an empty dir may be replaced). Where the rename cannot work (dir is a
// mount point), the files are written in place, head.json last, and Load
// names a dir without it as half-made.
func writeDir(dir string, files []newFile) error {
	dir = filepath.Clean(dir)
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	removeStaleInits(parent, base)
	tmp := filepath.Join(parent, "."+base+".init-"+strconv.Itoa(os.Getpid()))
	os.RemoveAll(tmp)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := writeFiles(tmp, files); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dir); err == nil {
		return syncDir(parent)
	}
	os.RemoveAll(tmp)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := writeFiles(dir, files); err != nil {
		for _, f := range files {
			os.Remove(filepath.Join(dir, f.name))
		}
		return err
	}
	return nil
}

func writeFiles(dir string, files []newFile) error {
	for _, f := range files {
		if err := writeNew(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	return nil
}

// removeStaleInits removes temp dirs of killed inits of the same dir
// (".BASE.init-PID" whose PID is gone).
func removeStaleInits(parent, base string) {
	ents, _ := os.ReadDir(parent)
	prefix := "." + base + ".init-"
	for _, e := range ents {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), prefix))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) || err != nil {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}
