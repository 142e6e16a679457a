package raylaunch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fsTree writes files under a fresh root: path → content.
func fsTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestContainerCPUs(t *testing.T) {
	const selfV2 = "proc/self/cgroup"
	for _, c := range []struct {
		name     string
		files    map[string]string
		affinity int
		want     int
	}{
		{"nothing readable", nil, 0, 0},
		{"affinity only", nil, 12, 12},
		{"v2 quota below affinity", map[string]string{"sys/fs/cgroup/cpu.max": "400000 100000\n"}, 16, 4},
		{"v2 quota above affinity", map[string]string{"sys/fs/cgroup/cpu.max": "3200000 100000\n"}, 8, 8},
		{"v2 no limit", map[string]string{"sys/fs/cgroup/cpu.max": "max 100000\n"}, 8, 8},
		{"v2 fraction floors", map[string]string{"sys/fs/cgroup/cpu.max": "250000 100000\n"}, 0, 2},
		{"v2 below one CPU is one", map[string]string{"sys/fs/cgroup/cpu.max": "50000 100000\n"}, 0, 1},
		{"v2 own group tighter than parent", map[string]string{
			selfV2:                             "0::/docker/abc\n",
			"sys/fs/cgroup/cpu.max":            "max 100000\n",
			"sys/fs/cgroup/docker/cpu.max":     "800000 100000\n",
			"sys/fs/cgroup/docker/abc/cpu.max": "300000 100000\n",
		}, 0, 3},
		{"v2 parent tighter than own group", map[string]string{
			selfV2:                             "0::/docker/abc\n",
			"sys/fs/cgroup/docker/cpu.max":     "200000 100000\n",
			"sys/fs/cgroup/docker/abc/cpu.max": "600000 100000\n",
		}, 0, 2},
		{"v2 own group unlimited, parent limited", map[string]string{
			selfV2:                             "0::/docker/abc\n",
			"sys/fs/cgroup/docker/cpu.max":     "200000 100000\n",
			"sys/fs/cgroup/docker/abc/cpu.max": "max 100000\n",
		}, 0, 2},
		{"v2 path escaping the mount ignored", map[string]string{
			selfV2:                  "0::/../../etc\n",
			"sys/fs/cgroup/cpu.max": "500000 100000\n",
		}, 0, 5},
		{"v1 quota", map[string]string{"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "600000\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"}, 32, 6},
		{"v1 no limit", map[string]string{"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 32, 32},
		{"garbage", map[string]string{"sys/fs/cgroup/cpu.max": "lots\n"}, 4, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := fsTree(t, c.files)
			got := ContainerCPUs(CPUConfig{Root: root, Affinity: func() int { return c.affinity }})
			if got != c.want {
				t.Errorf("got %d CPUs, want %d", got, c.want)
			}
		})
	}
	// A test root never reads the live affinity mask.
	if got := ContainerCPUs(CPUConfig{Root: t.TempDir()}); got != 0 {
		t.Errorf("empty root without an affinity seam: got %d, want 0", got)
	}
}

func TestRayCPUs(t *testing.T) {
	for _, c := range []struct{ head, container, want int }{
		{53, 8, 8},  // the container is smaller
		{4, 64, 4},  // the node type's cpus is smaller
		{53, 0, 53}, // nothing known of the container
		{0, 6, 6},
		{0, 0, 1},
	} {
		if got := RayCPUs(c.head, c.container); got != c.want {
			t.Errorf("RayCPUs(%d, %d) = %d, want %d", c.head, c.container, got, c.want)
		}
	}
}

func TestTempDir(t *testing.T) {
	short, err := os.MkdirTemp("/tmp", "rvt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	dir, err := TempDir(short, "")
	if err != nil || dir != filepath.Join(short, "ray") {
		t.Fatalf("short state dir: %q, %v; want STATE/ray", dir, err)
	}
	mode(t, dir)
	// Again (a restart of Ray): the same dir, still private.
	os.Chmod(dir, 0o755)
	if again, err := TempDir(short, ""); err != nil || again != dir {
		t.Errorf("second call: %q, %v", again, err)
	}
	mode(t, dir)

	long := filepath.Join(short, strings.Repeat("s", 60))
	os.Mkdir(long, 0o700)
	dir, err = TempDir(long, short)
	if err != nil || !strings.HasPrefix(dir, short+"/rv") {
		t.Fatalf("long state dir: %q, %v; want a fresh dir under %s", dir, err, short)
	}
	if len(dir) > MaxTempDirLen {
		t.Errorf("%q is %d bytes, over %d", dir, len(dir), MaxTempDirLen)
	}
	mode(t, dir)

	// A fallback too long for Ray's sockets: /tmp instead.
	if dir, err := TempDir(long, long); err != nil || !strings.HasPrefix(dir, "/tmp/rv") {
		t.Errorf("too long a fallback: %q, %v; want a dir under /tmp", dir, err)
	} else {
		os.Remove(dir)
	}
	link := filepath.Join(short, "l")
	os.Mkdir(link, 0o700)
	os.Symlink("/tmp", filepath.Join(link, "ray"))
	if _, err := TempDir(link, ""); err == nil {
		t.Error("STATE/ray as a symlink was accepted")
	}
}

func mode(t *testing.T, dir string) {
	t.Helper()
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v %v, want a 0700 dir", dir, st.Mode(), err)
	}
}
