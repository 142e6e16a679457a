package imagecheck

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// Test images are derived from the project's candidate image (built once
// per machine by candidateimage.Build, as the docker provider's tests do)
// by a shell step and a commit, or imported from a tiny root filesystem;
// each is removed when the test ends. Names carry the PID: the Docker
// Engine is shared with other test runs.

// candidate builds (or reuses) the candidate image: Debian minbase, the
// stand-in Ray (ray.__version__ 2.53.0, or FAKERAY_VERSION). Debian's
// base, never the host-files fallback: the derived images move Debian's
// python3.11 with Debian's mv and ln.
func candidate(t *testing.T, eng *dockerengine.Client) string {
	t.Helper()
	if _, err := exec.LookPath("debootstrap"); err != nil {
		rvtest.Need(t, "debootstrap (apt-get install debootstrap; .ci/run does): the derived images need Debian's base")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img, err := candidateimage.Build(ctx, candidateimage.Config{Engine: eng, FakerayDir: "../../test/fakeray", Base: candidateimage.BaseDebootstrap})
	if err != nil {
		t.Fatalf("build the candidate image: %v", err)
	}
	return img
}

// testName is a fresh image name of this run.
func testName(kind string) string {
	return fmt.Sprintf("rayvast-imagecheck-test:%s-%d", kind, os.Getpid())
}

// removeAtEnd removes image when the test ends.
func removeAtEnd(t *testing.T, eng *dockerengine.Client, image string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := eng.RemoveImage(ctx, image, true); err != nil {
			t.Logf("remove %s: %v", image, err)
		}
	})
}

// derive commits a container of base that ran script ("" runs nothing),
// with Dockerfile changes (ENV, EXPOSE) applied to its config.
func derive(t *testing.T, eng *dockerengine.Client, base, kind, script string, changes ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if script == "" {
		script = "true"
	}
	id, err := eng.CreateContainer(ctx, "", dockerengine.ContainerConfig{Image: base,
		Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"set -e\n" + script}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.RemoveContainer(context.Background(), id, true)
	if err := eng.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if code, err := eng.WaitContainer(ctx, id); err != nil || code != 0 {
		_, serr, _ := eng.ContainerLogs(ctx, id)
		t.Fatalf("derive %s: exit %d, %v: %s", kind, code, err, serr)
	}
	// The base's command, not the script, stays the image's.
	name := testName(kind)
	repo, tag, _ := strings.Cut(name, ":")
	if _, err := eng.Commit(ctx, id, repo, tag, append([]string{`ENTRYPOINT []`, `CMD ["/bin/sh"]`}, changes...)); err != nil {
		t.Fatalf("commit %s: %v", name, err)
	}
	removeAtEnd(t, eng, name)
	return name
}

// importRoot imports a root filesystem of files (path → content; mode
// 0755) and symlinks (path → "->target") as an image.
func importRoot(t *testing.T, eng *dockerengine.Client, kind string, entries map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777})
	dirs := map[string]bool{}
	for p, c := range entries {
		if d := filepath.Dir(p); !dirs[d] {
			dirs[d] = true
			_ = tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755})
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			_ = tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777})
			continue
		}
		_ = tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(c))})
		_, _ = tw.Write([]byte(c))
	}
	_ = tw.Close()
	name := testName(kind)
	repo, tag, _ := strings.Cut(name, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := eng.ImportImage(ctx, &buf, repo, tag, []string{"ENV PATH=/bin", `CMD ["/bin/sh"]`}); err != nil {
		t.Fatalf("import %s: %v", name, err)
	}
	removeAtEnd(t, eng, name)
	return name
}

// staticBusybox is a busybox with no ELF interpreter (no glibc needed):
// the host's if it is static, else Debian's busybox-static package
// (apt-get download: the mirror debootstrap uses for the candidate image).
func staticBusybox(t *testing.T) []byte {
	t.Helper()
	static := func(p string) bool {
		f, err := elf.Open(p)
		if err != nil {
			return false
		}
		defer f.Close()
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				return false
			}
		}
		return true
	}
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if static(p) {
			b, err := os.ReadFile(p)
			if err == nil {
				return b
			}
		}
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "apt-get download busybox-static >/dev/null && dpkg-deb -x busybox-static_*.deb root")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		rvtest.Need(t, fmt.Sprintf("no static busybox (host's is dynamic; apt-get download busybox-static: %v: %s)", err, out))
		return nil
	}
	p := filepath.Join(dir, "root/bin/busybox")
	if !static(p) {
		t.Fatalf("%s from busybox-static is not static", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
