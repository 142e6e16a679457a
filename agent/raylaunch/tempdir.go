package raylaunch

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rayvast/rayvast/internal/wire"
)

// MaxTempDirLen bounds Ray's --temp-dir. Ray puts its Unix sockets at
// TEMP/session_<date>_<time>_<µs>_<pid>/sockets/plasma_store.N
// (python/ray/_private/node.py: _prepare_socket_file, _make_inc_temp):
// 1+42+9+15 = 67 bytes after TEMP, and a socket path must fit Linux's
// 107 (sun_path less the NUL), so TEMP gets 40.
const MaxTempDirLen = 40

// TempDir makes Ray's private temp dir: STATE/ray when that path is short
// enough, else a fresh directory under fallback (default os.TempDir()),
// else under /tmp.
// Either is 0700: Ray keeps its session's sockets and logs there, and
// without --temp-dir a worker would use the head's path, which need not
// exist here.
func TempDir(state, fallback string) (string, error) {
	dir := filepath.Join(state, "ray")
	if len(dir) <= MaxTempDirLen {
		if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
			return "", fmt.Errorf("ray temp dir %s: %w", dir, err)
		}
		return dir, private(dir)
	}
	if fallback == "" {
		fallback = os.TempDir()
	}
	// MkdirTemp adds up to 10 digits to "rv".
	for _, base := range []string{fallback, "/tmp"} {
		if len(filepath.Join(base, "rv0123456789")) > MaxTempDirLen {
			continue
		}
		dir, err := os.MkdirTemp(base, "rv")
		if err != nil {
			return "", fmt.Errorf("ray temp dir under %s: %w", base, err)
		}
		return dir, private(dir)
	}
	return "", fmt.Errorf("ray temp dir: %s and /tmp are too long for Ray's %d-byte socket paths; set %s shorter", fallback, MaxTempDirLen, wire.EnvState)
}

// private makes dir 0700 and refuses one that is not a directory we own
// (an existing STATE/ray planted by someone else).
func private(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("ray temp dir %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("ray temp dir %s: not a directory", dir)
	}
	if !ownedByUs(st) {
		return fmt.Errorf("ray temp dir %s: not owned by this user", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("ray temp dir %s: %w", dir, err)
	}
	return nil
}
