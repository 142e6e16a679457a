package hostcheck

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Fixed inode numbers of the initial namespaces (linux/nsfs.h). The pid one
// is fixed since Linux 3.8; the net one only since the 6.18 namespace-tree
// work. Before that the initial netns got a dynamic inode like any other,
// and dynamic inodes start at 0xF0000000, so on no kernel can a netns other
// than the initial one carry netInitIno.
const (
	pidInitIno = 0xEFFFFFFC
	netInitIno = 0xEFFFFFF9 // 4026531833
)

// parseNsLink parses the target of a /proc/<pid>/ns/<kind> link, like
// "net:[4026531833]", and checks its kind.
func parseNsLink(link, kind string) (uint64, error) {
	rest, ok := strings.CutPrefix(link, kind+":[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return 0, fmt.Errorf("parse ns link %q: want %s:[INODE]", link, kind)
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(rest, "]"), 10, 64)
	if err != nil || ino == 0 {
		return 0, fmt.Errorf("parse ns link %q: bad inode", link)
	}
	return ino, nil
}

// readNsInode reads the namespace inode behind a /proc/<pid>/ns/<kind> link.
func readNsInode(path, kind string) (uint64, error) {
	link, err := os.Readlink(path)
	if err != nil {
		return 0, fmt.Errorf("readlink %s: %w", path, err)
	}
	return parseNsLink(link, kind)
}

// parseProcNetDev lists the interface names of a /proc/net/dev file (two
// header lines, then "name: counters" per interface).
func parseProcNetDev(r io.Reader) ([]string, error) {
	var names []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, _, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.Contains(name, "|") {
			continue // header lines
		}
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read net/dev: %w", err)
	}
	return names, nil
}

// kernelFixesNetInitIno reports whether a kernel release string (from
// /proc/sys/kernel/osrelease) is at least 6.18, which gives the initial
// netns the fixed inode netInitIno. Unparsable means no.
func kernelFixesNetInitIno(release string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimSpace(release), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 6 || major == 6 && minor >= 18
}
