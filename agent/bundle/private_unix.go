//go:build unix

package bundle

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// privateDir makes dir (and its parents) if missing, then insists that dir
// itself is a real directory, not a symlink, owned by this user, and
// tightens it to 0700 through the same descriptor. An image can ship
// /run/rayvast pre-made: as a symlink to a shared directory, or owned by
// another user, it would hand the node key and the cluster token to others.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("%s: a symlink or not a directory; refusing to put secrets there", dir)
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s: owned by uid %d, not by this user (%d); refusing to put secrets there", dir, st.Uid, os.Geteuid())
	}
	return f.Chmod(0o700)
}
