package candidateimage

import (
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// unmountUnder detaches every mount below dir (deepest first).
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var under []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			under = append(under, f[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(under)))
	for _, m := range under {
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
}
