package imagecheck

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rayvast "github.com/rayvast/rayvast"
	"github.com/rayvast/rayvast/head/shim"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestImages checks locally built images, each against the config a
// cluster would give it, and proves the verdict and the reason: which
// rows fail (every other row passes or is skipped) and what the reason
// tells the user to do; and, differentially, that the sh and python rows
// say what the real bootloader does in that image. Each image is built
// once, removed at the end.
func TestImages(t *testing.T) {
	rvtest.NeedDocker(t)
	eng := dockerengine.New("")
	content, libs := shim.Default()
	if len(libs) == 0 {
		rvtest.Need(t, "the shim carries no native library: run head/shim/native/build.sh head/shim/native/lib (build.sh does)")
	}
	cand := candidate(t, eng)
	fakeray := `rm -rf "$(python3 -c 'import os, ray; print(os.path.dirname(ray.__file__))')"`
	// Python moved to /opt/rv (a prefix of its own, so it still finds its
	// library): not on PATH, not in the bootloader's list.
	moved := `mkdir -p /opt/rv/bin /opt/rv/lib
mv /usr/bin/python3.11 /opt/rv/bin/python3
rm -f /usr/bin/python3
ln -s /usr/lib/python3.11 /opt/rv/lib/python3.11
ln -s /usr/lib/python3 /opt/rv/lib/python3
/opt/rv/bin/python3 -c 'import ray'`
	offPath := derive(t, eng, cand, "offpath", moved)
	bb := staticBusybox(t)
	busybox := map[string]string{"bin/busybox": string(bb)}
	for _, a := range []string{"sh", "mktemp", "chmod", "rm", "sleep", "wc", "ls", "cat"} {
		busybox["bin/"+a] = "->busybox"
	}
	cases := []struct {
		name, image     string
		ray             string // the config's ray.version
		cuda            map[string]float64
		shim            []byte   // the shim sent; nil: the built-in one
		fail            []string // the rows that must fail; none: the image passes
		reason, reason2 string   // in the first of them's detail (or, passing, in ray's)
	}{
		{name: "candidate passes", image: cand, ray: "2.53.0", reason: "ray 2.53.0"},
		{name: "without ray", image: derive(t, eng, cand, "noray", fakeray), ray: "2.53.0",
			fail: []string{"python"}, reason: "no Python that can import ray", reason2: "install ray[default]==2.53.0"},
		{name: "another ray version", image: derive(t, eng, cand, "ray260", "", "ENV FAKERAY_VERSION=2.60.0"), ray: "2.52.1",
			fail: []string{"ray"}, reason: "ray 2.60.0 is not the cluster's ray.version 2.52.1", reason2: "ray_version"},
		{name: "ray older than the floor", image: derive(t, eng, cand, "ray251", "", "ENV FAKERAY_VERSION=2.51.0"),
			fail: []string{"ray"}, reason: "older than 2.52"},
		{name: "python off the bootloader's path", image: offPath, ray: "2.53.0",
			fail: []string{"python"}, reason: "/opt/rv/bin/python3 imports ray but is not where the bootloader looks", reason2: "ENV RAYVAST_PYTHON=/opt/rv/bin/python3"},
		{name: "the advice works: RAYVAST_PYTHON", image: derive(t, eng, offPath, "offpathfixed", "", "ENV RAYVAST_PYTHON=/opt/rv/bin/python3"), ray: "2.53.0",
			reason: "ray 2.53.0"},
		{name: "EXPOSE", image: derive(t, eng, cand, "expose", "", "EXPOSE 8080"), ray: "2.53.0",
			fail: []string{"ports"}, reason: "EXPOSEs 8080/tcp", reason2: "gets 63"},
		{name: "no mktemp", image: derive(t, eng, cand, "nomktemp", "rm /usr/bin/mktemp"), ray: "2.53.0",
			fail: []string{"tools", "tmp exec"}, reason: "the bootloader runs mktemp", reason2: "install coreutils"},
		{name: "noexec temp dir", image: derive(t, eng, cand, "noexec", "", "ENV TMPDIR=/dev/shm"), ray: "2.53.0",
			fail: []string{"tmp exec"}, reason: "noexec", reason2: "TMPDIR"},
		{name: "CUDA newer than the filter", image: derive(t, eng, cand, "cuda", "", "ENV CUDA_VERSION=12.8.1"), ray: "2.53.0",
			cuda: map[string]float64{"a100": 12.1, "h100": 12.8},
			fail: []string{"cuda"}, reason: "CUDA 12.8 (CUDA_VERSION)", reason2: "a100 (cuda_max_good 12.1)"},
		{name: "busybox, no glibc", image: importRoot(t, eng, "busybox", busybox),
			fail: []string{"shim", "python"}, reason: "no glibc loader", reason2: "cannot load"},
		{name: "a native library the loader refuses", image: cand, ray: "2.53.0", shim: brokenNative(t, libs),
			fail: []string{"shim"}, reason: "the loader refused", reason2: "cannot be preloaded"},
		{name: "no sh", image: importRoot(t, eng, "nosh", map[string]string{"etc/hostname": "x\n"}),
			fail: []string{"sh"}, reason: "no /bin/sh"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sh := content
			if c.shim != nil {
				sh = c.shim
			}
			res, err := Run(ctx, Config{Engine: eng, Image: c.image, RayVersion: c.ray, CUDAFilters: c.cuda,
				Shim: sh, ShimNative: true})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			res.Print(&out)
			t.Logf("%s (%v):\n%s", c.image, res.Took.Round(time.Millisecond), out.String())
			if res.Took > 20*time.Second {
				t.Errorf("took %v, want seconds once the image is local", res.Took)
			}
			if res.OK() != (len(c.fail) == 0) {
				t.Errorf("OK() = %v, want %v", res.OK(), len(c.fail) == 0)
			}
			failing := map[string]bool{}
			for _, r := range res.Checks {
				if r.Verdict == Fail {
					failing[r.Name] = true
				}
			}
			for _, n := range c.fail {
				if !failing[n] {
					t.Errorf("row %q: %s, want FAIL", n, res.Get(n).Verdict)
				}
				delete(failing, n)
			}
			for n := range failing {
				t.Errorf("row %q failed too: %s", n, res.Get(n).Detail)
			}
			differential(t, eng, c.image, res)
			row := "ray"
			if len(c.fail) > 0 {
				row = c.fail[0]
			}
			for _, want := range []string{c.reason, c.reason2} {
				if d := res.Get(row).Detail; !strings.Contains(d, want) {
					t.Errorf("row %q: %q, want it to say %q", row, d, want)
				}
			}
		})
	}
	if n := leftovers(t, eng); n > 0 {
		t.Errorf("%d check containers left behind", n)
	}
}

// differential runs the real bootloader in the image, started as a rental
// is (the env a rental gets, a head that is not there, one download try),
// and proves the check's sh and python rows say what the bootloader does:
// no shell, no Python found (its own message), or a Python found and the
// next steps run.
func differential(t *testing.T, eng *dockerengine.Client, image string, res Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := eng.CreateContainer(ctx, "", dockerengine.ContainerConfig{Image: image,
		Entrypoint: []string{"/bin/sh"}, Cmd: []string{"-c", rayvast.Bootloader()},
		Env:        []string{"RAYVAST_HEAD=127.0.0.1", "RAYVAST_PORT_A=9", "RAYVAST_BOOTSTRAP_SHA256=" + strings.Repeat("0", 64), "RAYVAST_BOOT_TRIES=1"},
		HostConfig: dockerengine.HostConfig{NetworkMode: "none", CapDrop: []string{"NET_RAW", "NET_ADMIN"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.RemoveContainer(context.Background(), id, true)
	if err := eng.StartContainer(ctx, id); err != nil {
		if res.Get("sh").Verdict != Fail {
			t.Errorf("the bootloader did not start (%v), but the sh row is %s", err, res.Get("sh").Verdict)
		}
		return
	}
	if res.Get("sh").Verdict == Fail {
		t.Errorf("the bootloader started, but the sh row failed")
	}
	if _, err := eng.WaitContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, stderr, _ := eng.ContainerLogs(ctx, id)
	found := !strings.Contains(string(stderr), "bootloader: no Python that can import ray")
	// Past the search: the download tried, or (no mktemp) its temp dir refused.
	tried := strings.Contains(string(stderr), "bootloader: gave up on https://127.0.0.1:9/bootstrap") ||
		strings.Contains(string(stderr), "bootloader: cannot make a private temp dir")
	if ok := res.Get("python").Verdict == OK; ok != found || found != tried {
		t.Errorf("python row %s, but the bootloader said: %s", res.Get("python").Verdict, stderr)
	}
}

// brokenNative is the shim carrying, for this machine, the head of the
// real native library only: the ELF header the shim matches by, a body
// the loader cannot map.
func brokenNative(t *testing.T, libs []string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../shim/native/lib", libs[0]))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shim.Assemble([][]byte{b[:256]})
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// leftovers counts containers of the check that still exist.
func leftovers(t *testing.T, eng *dockerengine.Client) int {
	t.Helper()
	cs, err := eng.ListContainers(context.Background(), Label+"=1")
	if err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

// TestCancelRemovesContainer proves a Ctrl-C (the context cancelled while
// the probe runs) still removes the container: the image's Python hangs
// in the bootloader's `import ray` check.
func TestCancelRemovesContainer(t *testing.T) {
	rvtest.NeedDocker(t)
	eng := dockerengine.New("")
	img := derive(t, eng, candidate(t, eng), "hang", `printf '#!/bin/sh\nexec sleep 120\n' >/usr/local/bin/hang; chmod 755 /usr/local/bin/hang`,
		"ENV RAYVAST_PYTHON=/usr/local/bin/hang")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, Config{Engine: eng, Image: img})
	if err == nil {
		t.Fatal("a cancelled check gave no error")
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("returned %v after the cancel", d)
	}
	if n := leftovers(t, eng); n > 0 {
		t.Errorf("%d check containers left after a cancel", n)
	}
}

// TestNotLocal: an image that is not on this machine is named, with what
// to do, and nothing is pulled.
func TestNotLocal(t *testing.T) {
	rvtest.NeedDocker(t)
	_, err := Run(context.Background(), Config{Image: "rayvast-imagecheck-test:absent"})
	if err == nil || !strings.Contains(err.Error(), "docker pull") {
		t.Errorf("err = %v, want it to say docker pull", err)
	}
}
