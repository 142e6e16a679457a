package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/rayvast/rayvast/internal/wire"
)

// checkShm passes when ROOT/dev/shm exists and has no entries at all
// (dotfiles included): a shared /dev/shm with entries is a sign of an IPC
// namespace or tmpfs shared with the host or other tenants.
func checkShm(cfg Config) wire.Check {
	dir := cfg.path("/dev/shm")
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fail("/dev/shm is missing")
	case err != nil:
		return fail(fmt.Sprintf("cannot list /dev/shm: %v", err))
	case len(entries) > 0:
		var names []string
		for i, e := range entries {
			if i == 5 {
				names = append(names, "…")
				break
			}
			names = append(names, e.Name())
		}
		return fail(fmt.Sprintf("/dev/shm has %d entries: %s", len(entries), strings.Join(names, ", ")))
	default:
		return pass("/dev/shm is empty")
	}
}
