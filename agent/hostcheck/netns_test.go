package hostcheck

import (
	"slices"
	"strings"
	"testing"
)

func TestParseNsLink(t *testing.T) {
	tests := []struct {
		link, kind string
		want       uint64
		wantErr    bool
	}{
		{"net:[4026531833]", "net", netInitIno, false},
		{"net:[4026532301]", "net", 4026532301, false},
		{"pid:[4026531836]", "pid", pidInitIno, false},
		{"pid:[4026531836]", "net", 0, true},
		{"net:[]", "net", 0, true},
		{"net:[0]", "net", 0, true},
		{"net:[12x]", "net", 0, true},
		{"net:4026531833", "net", 0, true},
		{"/proc/self/ns/net", "net", 0, true},
	}
	for _, tt := range tests {
		got, err := parseNsLink(tt.link, tt.kind)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("parseNsLink(%q, %q) got %d, %v, want %d, error %v", tt.link, tt.kind, got, err, tt.want, tt.wantErr)
		}
	}
}

const netDevContainer = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     120       2    0    0    0     0          0         0      120       2    0    0    0     0       0          0
  eth0: 9043211    6123    0    0    0     0          0         0   391200    4122    0    0    0     0       0          0
`

const netDevHost = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 2661360   29511    0    0    0     0          0         0  2661360   29511    0    0    0     0       0          0
enp5s0:123 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0
docker0:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
veth1a2b3c4:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
`

func TestParseProcNetDev(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{netDevContainer, []string{"lo", "eth0"}},
		{netDevHost, []string{"lo", "enp5s0", "docker0", "veth1a2b3c4"}},
		{"", nil},
	} {
		got, err := parseProcNetDev(strings.NewReader(tt.in))
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("got %q, %v, want %q", got, err, tt.want)
		}
	}
}

func TestKernelFixesNetInitIno(t *testing.T) {
	for rel, want := range map[string]bool{
		"6.18.44-fc-v857\n": true, "6.18": true, "6.19.0": true, "7.0.1": true,
		"6.17.9": false, "5.15.0-91-generic": false, "3.8.0": false, "": false, "garbage": false,
	} {
		if got := kernelFixesNetInitIno(rel); got != want {
			t.Errorf("kernelFixesNetInitIno(%q) got %v, want %v", rel, got, want)
		}
	}
}

// TestDecideNetns walks the rule: host proofs fail, private proofs pass,
// and only without either do the interfaces decide.
func TestDecideNetns(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name       string
		f          netnsFacts
		wantOK     bool
		wantDetail string
	}{
		{"unreadable", netnsFacts{selfErr: "readlink: denied"}, false, "cannot read own netns: readlink: denied"},
		{"fixed init inode", netnsFacts{selfIno: netInitIno, selfIsPID1: true, ifaces: []string{"lo", "eth0"}}, false, "initial netns's fixed inode"},
		{"fixed init inode even on a kernel we think is old", netnsFacts{selfIno: netInitIno}, false, "fixed inode"},
		{"shares host init by inode", netnsFacts{selfIno: 4026531992, pid1Ino: 4026531992, pid1InitPidNS: true, ifaces: []string{"lo", "eth0"}}, false, "shared with the host's init"},
		{"shares host init by live handle", netnsFacts{selfIno: 4026531992, pid1InitPidNS: true, liveSame: &yes}, false, "shared with the host's init"},
		{"shares container init: no proof either way", netnsFacts{selfIno: 4026532500, pid1Ino: 4026532500, liveSame: &yes, ifaces: []string{"lo", "eth0"}}, true, "no host interfaces"},
		{"new kernel, other inode", netnsFacts{selfIno: 4026532500, selfIsPID1: true, fixedKernel: true, ifaces: []string{"lo", "eth0"}}, true, "kernel fixes the initial netns inode"},
		{"new kernel beats plumbing", netnsFacts{selfIno: 4026532500, fixedKernel: true, ifaces: []string{"lo", "docker0"}, plumbing: []string{"docker0"}}, true, "despite host-like container plumbing docker0"},
		{"host init elsewhere", netnsFacts{selfIno: 4026532500, pid1Ino: 4026531992, pid1InitPidNS: true, liveSame: &no}, true, "the host's init is in netns 4026531992"},
		{"old kernel, PID 1, plumbing", netnsFacts{selfIno: 4026531992, selfIsPID1: true, ifaces: []string{"lo", "eth0", "docker0", "veth12"}, plumbing: []string{"docker0", "veth12"}}, false, "container plumbing docker0,veth12"},
		{"old kernel, PID 1, physical NIC", netnsFacts{selfIno: 4026531992, selfIsPID1: true, ifaces: []string{"lo", "enp5s0"}, physical: []string{"enp5s0"}}, false, "physical NICs enp5s0"},
		{"old kernel, PID 1, lo and eth0", netnsFacts{selfIno: 4026532500, selfIsPID1: true, ifaces: []string{"lo", "eth0"}}, true, "interfaces lo,eth0"},
		{"fresh netns with only lo", netnsFacts{selfIno: 4026532500, ifaces: []string{"lo"}}, true, "interfaces lo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideNetns(tt.f)
			if got.OK != tt.wantOK || !strings.Contains(got.Detail, tt.wantDetail) {
				t.Errorf("got %+v, want ok=%v detail containing %q", got, tt.wantOK, tt.wantDetail)
			}
		})
	}
}

// TestCheckNetnsFakeRoot proves the facts are read from ROOT: ns links,
// PID 1, kernel release, /proc/net/dev and a matching sysfs.
func TestCheckNetnsFakeRoot(t *testing.T) {
	container := map[string]string{
		"proc/self -> 1":                    "",
		"proc/1/ns/net -> net:[4026532611]": "",
		"proc/sys/kernel/osrelease":         "5.15.0-91-generic\n",
		"proc/net/dev":                      netDevContainer,
		"sys/class/net/lo/":                 "",
		"sys/class/net/eth0/":               "",
	}
	with := func(base map[string]string, extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			name, _, _ := strings.Cut(k, " -> ")
			for old := range m {
				if oldName, _, _ := strings.Cut(old, " -> "); oldName == name {
					delete(m, old) // a link replaces a link of the same name
				}
			}
			m[k] = v
		}
		return m
	}
	hostOld := map[string]string{
		"proc/self -> 1":                    "",
		"proc/1/ns/net -> net:[4026531992]": "",
		"proc/sys/kernel/osrelease":         "5.15.0-91-generic\n",
		"proc/net/dev":                      netDevHost,
		"sys/class/net/lo/":                 "",
		"sys/class/net/enp5s0/device/":      "",
		"sys/class/net/docker0/":            "",
		"sys/class/net/veth1a2b3c4/":        "",
	}
	hostNICOnly := map[string]string{
		"proc/self -> 1":                    "",
		"proc/1/ns/net -> net:[4026531992]": "",
		"proc/net/dev":                      "a|\nb|\nlo: 0\nenp5s0: 0\n",
		"sys/class/net/lo/":                 "",
		"sys/class/net/enp5s0/device/":      "",
	}
	tests := []struct {
		name       string
		tree       map[string]string
		wantOK     bool
		wantDetail string
	}{
		{"container on an old kernel", container, true, "own netns 4026532611"},
		{"container on a new kernel", with(container, map[string]string{"proc/sys/kernel/osrelease": "6.18.1\n"}), true, "kernel fixes"},
		{"host net on a new kernel", with(container, map[string]string{"proc/1/ns/net -> net:[4026531833]": ""}), false, "fixed inode"},
		{"host net on an old kernel", hostOld, false, "container plumbing docker0,veth1a2b3c4, physical NICs enp5s0"},
		{"host net without docker, old kernel", hostNICOnly, false, "physical NICs enp5s0"},
		{"host's /sys bind-mounted into a container is not trusted", with(container, map[string]string{
			"sys/class/net/eth0/device/": "", "sys/class/net/docker0/": ""}), true, "own netns"},
		{"agent under an init, host init visible and elsewhere", with(container, map[string]string{
			"proc/self -> 77": "", "proc/77/ns/net -> net:[4026532611]": "",
			"proc/1/ns/net -> net:[4026531992]": "", "proc/1/ns/pid -> pid:[4026531836]": ""}), true, "the host's init is in netns 4026531992"},
		{"agent shares the host init's netns", with(hostNICOnly, map[string]string{
			"proc/self -> 77": "", "proc/77/ns/net -> net:[4026531992]": "", "proc/1/ns/pid -> pid:[4026531836]": ""}), false, "shared with the host's init"},
		{"agent shares a container init's netns", with(container, map[string]string{
			"proc/self -> 77": "", "proc/77/ns/net -> net:[4026532611]": "", "proc/1/ns/pid -> pid:[4026532612]": ""}), true, "own netns 4026532611"},
		{"no ns link", map[string]string{"proc/net/dev": netDevContainer}, false, "cannot read own netns"},
		{"not a net link", map[string]string{"proc/self -> 1": "", "proc/1/ns/net -> mnt:[4026531840]": ""}, false, "want net:[INODE]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkNetns(Config{Root: tree(t, tt.tree)}.withDefaults())
			if got.OK != tt.wantOK || !strings.Contains(got.Detail, tt.wantDetail) {
				t.Errorf("got %+v, want ok=%v detail containing %q", got, tt.wantOK, tt.wantDetail)
			}
		})
	}
}
