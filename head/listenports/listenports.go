// Package listenports finds the TCP ports a process and its descendants
// listen on, from /proc: the Ray head's ports, some of which Ray picks at
// random each run, for the head's firewall to guard and for `head up` to
// name. Parsing (/proc/net/tcp, /proc/PID/stat) is kept apart from reading,
// and every path is built from a root so tests use a fake /proc.
package listenports

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Listener is one listening TCP socket of the tree.
type Listener struct {
	Addr netip.AddrPort // the bound address: 0.0.0.0, ::, or one address
	PID  int            // a process holding it
}

// Exposed reports whether others than this machine may reach it: it is
// not bound to a loopback address.
func (l Listener) Exposed() bool { return !l.Addr.Addr().Unmap().IsLoopback() }

// Of lists the listening TCP sockets held by pid or any of its
// descendants, read under root (default "/"). Processes that end while
// it reads are skipped.
func Of(root string, pid int) ([]Listener, error) {
	if root == "" {
		root = "/"
	}
	pids, err := Tree(root, pid)
	if err != nil {
		return nil, err
	}
	byInode := map[uint64]int{}
	for _, p := range pids {
		for _, ino := range socketInodes(root, p) {
			byInode[ino] = p
		}
	}
	socks, err := Namespace(root, pid)
	if err != nil {
		return nil, err
	}
	var out []Listener
	for ino, ap := range socks {
		if p, ok := byInode[ino]; ok {
			out = append(out, Listener{Addr: ap, PID: p})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr.Compare(out[j].Addr) < 0 })
	return out, nil
}

// Namespace lists the listening TCP sockets of pid's network namespace,
// whoever holds them, by socket inode: /proc/PID/net/tcp and tcp6 under
// root (default "/"). A file that cannot be opened (no IPv6, or the
// process just ended) adds nothing.
func Namespace(root string, pid int) (map[uint64]netip.AddrPort, error) {
	if root == "" {
		root = "/"
	}
	out := map[uint64]netip.AddrPort{}
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(root, "proc", strconv.Itoa(pid), "net", name))
		if err != nil {
			continue
		}
		ls, err := ParseTCP(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("listen ports of %d: %w", pid, err)
		}
		maps.Copy(out, ls)
	}
	return out, nil
}

// ExposedPorts is the sorted port numbers of the exposed listeners.
func ExposedPorts(ls []Listener) []int {
	seen := map[int]bool{}
	var out []int
	for _, l := range ls {
		if p := int(l.Addr.Port()); l.Exposed() && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out
}

// Tree is pid and its descendants, by the parent PIDs in /proc/*/stat.
func Tree(root string, pid int) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(root, "proc"))
	if err != nil {
		return nil, fmt.Errorf("process tree of %d: %w", pid, err)
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, "proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if pp, err := ParsePPid(string(b)); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// ParsePPid reads the parent PID from a /proc/PID/stat line. The command
// name in parentheses may hold spaces and parentheses: the fields start
// after its last ')'.
func ParsePPid(stat string) (int, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("stat %q: short", stat)
	}
	return strconv.Atoi(f[1])
}

// socketInodes are the inodes of the sockets among pid's open files.
func socketInodes(root string, pid int) []uint64 {
	dir := filepath.Join(root, "proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []uint64
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if s, ok := strings.CutPrefix(l, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// stateListen is TCP_LISTEN in /proc/net/tcp's st column.
const stateListen = "0A"

// ParseTCP reads /proc/net/tcp or /proc/net/tcp6: the listening sockets'
// bound addresses by socket inode.
func ParseTCP(r io.Reader) (map[uint64]netip.AddrPort, error) {
	out := map[uint64]netip.AddrPort{}
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		if f[3] != stateListen {
			continue
		}
		ap, err := parseAddrPort(f[1])
		if err != nil {
			return nil, err
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("inode %q: %w", f[9], err)
		}
		out[ino] = ap
	}
	return out, sc.Err()
}

// parseAddrPort reads "0100007F:1F90": the address as the kernel's 32-bit
// words in host (little-endian) order, the port in hex.
func parseAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %w", s, err)
	}
	b, err := hex.DecodeString(a)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q", s)
	}
	for i := 0; i < len(b); i += 4 { // each word little-endian
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	ip, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(ip, uint16(port)), nil
}
