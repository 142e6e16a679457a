package raylaunch

import (
	"bufio"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUConfig says where to look for the CPUs the container may use.
type CPUConfig struct {
	// Root is the host root the /proc and /sys paths are built from ("" = "/").
	Root string
	// Affinity counts the CPUs of the calling process's affinity mask
	// (sched_getaffinity); nil uses the live syscall when Root is "/",
	// and nothing otherwise.
	Affinity func() int
}

// ContainerCPUs is how many whole CPUs the container may use: the smaller
// of its affinity mask and its cgroup CPU quota (floored: a quota of 1.5
// CPUs runs one Ray task well, two badly). 0 means nothing could be read.
func ContainerCPUs(cfg CPUConfig) int {
	root := cfg.Root
	if root == "" {
		root = "/"
	}
	aff := cfg.Affinity
	if aff == nil && filepath.Clean(root) == "/" {
		aff = liveAffinity
	}
	best := 0
	take := func(n int) {
		if n > 0 && (best == 0 || n < best) {
			best = n
		}
	}
	if aff != nil {
		take(aff())
	}
	take(cgroupV2CPUs(root))
	take(cgroupV1CPUs(root))
	return best
}

// RayCPUs is --num-cpus: the head's cap, lowered to what the container may
// use. Never below 1: Ray with no CPU runs no task at all.
func RayCPUs(headCap, container int) int {
	n := headCap
	if container > 0 && (n <= 0 || container < n) {
		n = container
	}
	return max(n, 1)
}

// cgroupV2CPUs reads cpu.max along the process's cgroup path (from
// /proc/self/cgroup) up to the mount's root, and returns the tightest
// quota: a parent's limit binds its children too. Inside a cgroup
// namespace the path is "/" and only the top file counts.
func cgroupV2CPUs(root string) int {
	base := filepath.Join(root, "sys/fs/cgroup")
	p := cgroupV2Path(filepath.Join(root, "proc/self/cgroup"))
	best := 0
	for {
		if n := parseCPUMax(readSmall(filepath.Join(base, p, "cpu.max"))); n > 0 && (best == 0 || n < best) {
			best = n
		}
		if p == "/" || p == "." || p == "" {
			return best
		}
		p = path.Dir(p)
	}
}

// cgroupV2Path is the "0::PATH" entry of /proc/self/cgroup, or "/".
func cgroupV2Path(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return "/"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok && strings.HasPrefix(p, "/") && !strings.Contains(p, "..") {
			return path.Clean(p)
		}
	}
	return "/"
}

// parseCPUMax reads cgroup v2's "QUOTA PERIOD" ("max PERIOD" = no limit).
func parseCPUMax(s string) int {
	f := strings.Fields(s)
	if len(f) != 2 || f[0] == "max" {
		return 0
	}
	return quotaCPUs(f[0], f[1])
}

// cgroupV1CPUs reads the CFS quota of cgroup v1's cpu controller as the
// container sees it mounted (v1 has no cgroup namespace path to follow
// here; a container's own mount shows its own group).
func cgroupV1CPUs(root string) int {
	for _, dir := range []string{"sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct"} {
		d := filepath.Join(root, dir)
		q := strings.TrimSpace(readSmall(filepath.Join(d, "cpu.cfs_quota_us")))
		p := strings.TrimSpace(readSmall(filepath.Join(d, "cpu.cfs_period_us")))
		if n := quotaCPUs(q, p); n > 0 {
			return n
		}
	}
	return 0
}

// quotaCPUs is floor(quota/period), at least 1 for any positive quota;
// 0 for no limit (-1) or anything unreadable.
func quotaCPUs(quota, period string) int {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0
	}
	n := math.Floor(float64(q) / float64(p))
	return max(int(n), 1)
}

// readSmall reads a small kernel file; "" when it cannot.
func readSmall(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := f.Read(b)
	return string(b[:n])
}
