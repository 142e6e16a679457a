//go:build !unix

package bundle

import "os"

// privateDir makes dir 0700 (no symlink or owner checks off unix).
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}
