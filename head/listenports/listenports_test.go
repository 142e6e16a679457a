package listenports

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// Lines as the kernel writes them (trimmed of the columns after inode).
const tcp4 = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2049 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
   1: 00000000:ACD9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2222 1 0000000000000000 100 0 0 10 0
   2: 0164640A:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3333 1 0000000000000000 100 0 0 10 0
   3: 0164640A:18EB 0264640A:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 100 0 0 10 0
`

const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:ACDB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5555 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6666 1 0000000000000000 100 0 0 10 0
`

// ParseTCP keeps listening sockets only, with the kernel's little-endian
// words turned into addresses.
func TestParseTCP(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       map[uint64]string
	}{
		{"v4", tcp4, map[uint64]string{1111: "127.0.0.1:8265", 2222: "0.0.0.0:44249", 3333: "10.100.100.1:6379"}},
		{"v6", tcp6, map[uint64]string{5555: "[::]:44251", 6666: "[::1]:80"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTCP(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			gs := map[uint64]string{}
			for k, v := range got {
				gs[k] = v.String()
			}
			if !reflect.DeepEqual(gs, tc.want) {
				t.Errorf("got %v, want %v", gs, tc.want)
			}
		})
	}
	if _, err := ParseTCP(strings.NewReader("h\n 0: XYZ:0050 0:0 0A a b c d e 1\n")); err == nil {
		t.Error("a bad address parsed")
	}
}

// ParsePPid reads past a command name with spaces and parentheses.
func TestParsePPid(t *testing.T) {
	for stat, want := range map[string]int{
		"42 (raylet) S 7 42 42 0":           7,
		"43 (ray::IDLE (x) y) S 42 42 42 0": 42,
	} {
		got, err := ParsePPid(stat)
		if err != nil || got != want {
			t.Errorf("ParsePPid(%q) = %d, %v; want %d", stat, got, err, want)
		}
	}
	for _, bad := range []string{"42 raylet S 7", "42 (raylet)"} {
		if _, err := ParsePPid(bad); err == nil {
			t.Errorf("ParsePPid(%q) parsed", bad)
		}
	}
}

// Of, on a fake /proc: the tree's sockets only (a child's and a
// grandchild's, not a stranger's), and ExposedPorts leaves loopback out.
func TestOfFakeProc(t *testing.T) {
	root := t.TempDir()
	proc := func(pid, ppid int, inodes ...int) {
		dir := filepath.Join(root, "proc", strconv.Itoa(pid))
		must(t, os.MkdirAll(filepath.Join(dir, "fd"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(fmt.Sprintf("%d (p x) S %d 1 1 0", pid, ppid)), 0o644))
		must(t, os.Symlink("/dev/null", filepath.Join(dir, "fd", "0")))
		for i, ino := range inodes {
			must(t, os.Symlink(fmt.Sprintf("socket:[%d]", ino), filepath.Join(dir, "fd", strconv.Itoa(i+3))))
		}
	}
	proc(10, 1, 1111)  // the root: 127.0.0.1:8265
	proc(11, 10, 2222) // child: 0.0.0.0:44249
	proc(12, 11, 3333) // grandchild: 10.100.100.1:6379
	proc(20, 1, 5555)  // not in the tree
	proc(13, 10, 4444) // an established connection, not a listener
	must(t, os.MkdirAll(filepath.Join(root, "proc", "10", "net"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "proc", "10", "net", "tcp"), []byte(tcp4), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "proc", "10", "net", "tcp6"), []byte(tcp6), 0o644))
	ls, err := Of(root, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, fmt.Sprintf("%s@%d", l.Addr, l.PID))
	}
	want := []string{"0.0.0.0:44249@11", "10.100.100.1:6379@12", "127.0.0.1:8265@10"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Of = %v, want %v", got, want)
	}
	if got, want := ExposedPorts(ls), []int{6379, 44249}; !reflect.DeepEqual(got, want) {
		t.Errorf("ExposedPorts = %v, want %v", got, want)
	}
}

// Of on this machine's /proc finds a listener of the test process itself.
func TestOfSelf(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls, err := Of("", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := netip.MustParseAddrPort(l.Addr().String())
	for _, x := range ls {
		if x.Addr == want && x.PID == os.Getpid() {
			if x.Exposed() {
				t.Errorf("%s counted as exposed", x.Addr)
			}
			return
		}
	}
	t.Errorf("Of(self) = %v, lacks %s", ls, want)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
