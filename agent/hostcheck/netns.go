package hostcheck

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/rayvast/rayvast/internal/wire"
)

// netnsFacts are the signals checkNetns gathers; decideNetns judges them.
type netnsFacts struct {
	selfIno       uint64   // inode of our netns (0: unreadable)
	selfErr       string   // why selfIno is 0
	selfIsPID1    bool     // we are PID 1 of the visible /proc
	pid1Ino       uint64   // inode of PID 1's netns when we are not PID 1 (0: not visible)
	pid1InitPidNS bool     // PID 1 is in the initial pid namespace, i.e. the host's init
	liveSame      *bool    // netns.Get vs /proc/1/ns/net by dev+inode (live only, not PID 1)
	fixedKernel   bool     // kernel gives the initial netns the fixed inode
	ifaces        []string // interfaces of our netns (/proc/net/dev)
	plumbing      []string // of those: host-side container plumbing (docker0, veth*, …)
	physical      []string // of those: physical NICs per a sysfs that matches /proc/net/dev
}

// decideNetns is the netns rule. Proof of the host netns fails: our inode
// is the fixed initial one (no other netns can have it on any kernel), or we
// share the netns of the host's init (PID 1 of the initial pid namespace).
// Otherwise proof of a private netns passes: the kernel fixes the initial
// inode and ours differs, or the host's init is visible in another netns.
// Without either proof (older kernel, agent is PID 1 of its own pid
// namespace: the usual vast case) the interfaces decide: host-side container
// plumbing (docker0, veth*, bridges) or physical NICs are only ever seen in
// the host netns, so they fail; a lone lo/eth0 passes.
func decideNetns(f netnsFacts) wire.Check {
	if f.selfIno == 0 {
		return fail("cannot read own netns: " + f.selfErr)
	}
	ifaces := "interfaces " + orNone(f.ifaces)
	switch {
	case f.selfIno == netInitIno:
		return fail(fmt.Sprintf("host netns: inode %d is the initial netns's fixed inode; %s", f.selfIno, ifaces))
	case f.pid1InitPidNS && (f.pid1Ino == f.selfIno || f.liveSame != nil && *f.liveSame):
		return fail(fmt.Sprintf("host netns: shared with the host's init (PID 1 of the initial pid namespace), inode %d; %s", f.selfIno, ifaces))
	}
	var proof string
	switch {
	case f.fixedKernel:
		proof = fmt.Sprintf("kernel fixes the initial netns inode at %d", uint64(netInitIno))
	case f.pid1InitPidNS && f.pid1Ino != 0 && f.pid1Ino != f.selfIno:
		proof = fmt.Sprintf("the host's init is in netns %d", f.pid1Ino)
	}
	var hostSigns []string
	if len(f.plumbing) > 0 {
		hostSigns = append(hostSigns, "container plumbing "+strings.Join(f.plumbing, ","))
	}
	if len(f.physical) > 0 {
		hostSigns = append(hostSigns, "physical NICs "+strings.Join(f.physical, ","))
	}
	switch {
	case proof != "" && len(hostSigns) > 0:
		return pass(fmt.Sprintf("own netns %d (%s) despite host-like %s; %s", f.selfIno, proof, strings.Join(hostSigns, ", "), ifaces))
	case proof != "":
		return pass(fmt.Sprintf("own netns %d (%s); %s", f.selfIno, proof, ifaces))
	case len(hostSigns) > 0:
		return fail(fmt.Sprintf("host netns likely: %s seen in netns %d and no proof of a private netns; %s", strings.Join(hostSigns, ", "), f.selfIno, ifaces))
	default:
		return pass(fmt.Sprintf("own netns %d: not the initial inode, no host init sharing it, no host interfaces; %s", f.selfIno, ifaces))
	}
}

func checkNetns(cfg Config) wire.Check {
	return decideNetns(gatherNetns(cfg))
}

func gatherNetns(cfg Config) netnsFacts {
	var f netnsFacts
	ino, err := readNsInode(cfg.path("/proc/self/ns/net"), "net")
	if err != nil {
		f.selfErr = err.Error()
	}
	f.selfIno = ino
	self, err := os.Readlink(cfg.path("/proc/self"))
	f.selfIsPID1 = err == nil && self == "1"
	if !f.selfIsPID1 {
		// Unreadable (no ptrace access to another PID 1) just means not visible.
		f.pid1Ino, _ = readNsInode(cfg.path("/proc/1/ns/net"), "net")
		pidIno, _ := readNsInode(cfg.path("/proc/1/ns/pid"), "pid")
		f.pid1InitPidNS = pidIno == pidInitIno
		if cfg.live() {
			f.liveSame = liveSharesPID1Netns()
		}
	}
	if rel, err := os.ReadFile(cfg.path("/proc/sys/kernel/osrelease")); err == nil {
		f.fixedKernel = kernelFixesNetInitIno(string(rel))
	}
	if d, err := os.Open(cfg.path("/proc/net/dev")); err == nil {
		f.ifaces, _ = parseProcNetDev(d)
		d.Close()
	}
	for _, name := range f.ifaces {
		if isPlumbing(name) {
			f.plumbing = append(f.plumbing, name)
		}
	}
	f.physical = physicalNICs(cfg, f.ifaces)
	return f
}

// plumbingPrefixes name interfaces that container runtimes create in the
// host netns and never move into a container (a container sees its veth
// end renamed to eth0). Kernel fallback devices such as tunl0 or sit0 are
// not here: they appear in every netns once their module is loaded.
var plumbingPrefixes = []string{"docker0", "docker_gwbridge", "veth", "br-", "cni", "virbr", "lxcbr", "lxdbr", "podman", "cali", "flannel", "cilium_", "kube-ipvs", "weave"}

func isPlumbing(name string) bool {
	return slices.ContainsFunc(plumbingPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// physicalNICs lists interfaces backed by a device (ROOT/sys/class/net/X/device).
// sysfs shows the netns of whoever mounted it, which may not be ours (a bind
// mount of the host's /sys), so it is only trusted when it lists exactly the
// interfaces of our /proc/net/dev.
func physicalNICs(cfg Config, ifaces []string) []string {
	entries, err := os.ReadDir(cfg.path("/sys/class/net"))
	if err != nil || len(ifaces) == 0 {
		return nil
	}
	var sys []string
	for _, e := range entries {
		sys = append(sys, e.Name())
	}
	if !sameSet(sys, ifaces) {
		return nil
	}
	var out []string
	for _, name := range ifaces {
		if _, err := os.Stat(cfg.path("/sys/class/net/" + name + "/device")); err == nil {
			out = append(out, name)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ",")
}
