package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rayenv"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestOwnImage (issue 33): docs/own-image.md's two recipes built here as a
// user builds them, and head image-check's verdict on each held against
// what a rental of it does (Docker provider, vast's NAT, real Ray):
//   - Ray by pip (Debian's python3, a venv at /opt/venv, `pip install
//     ray[default]==V` from the wheel folder instead of the index):
//     image-check exits 0, and a rental enrolls and runs a job's task;
//   - the same with the agent the head serves at /opt/rayvast/agent: it
//     enrolls and runs a task, and the head serves no download
//     (rayvast_agent_downloads_total 0; test/bootloader's TestEmbeddedAgent
//     shows another agent there is not run);
//   - the pip image under a config of the other Ray: image-check exits 1
//     on its ray row, and a rental is rejected ray_version.
func TestOwnImage(t *testing.T) {
	rvtest.NeedRoot(t, "ip", "iptables", "nft")
	version, other := rvtest.RayNewest, rvtest.RayOldest
	pip := rayByPip(t, version)
	t.Run("Ray by pip", func(t *testing.T) {
		c := startRayClusterImage(t, version, pip, rvtest.RayPython(t, version), 1, 1, nil)
		if code, out := imageCheck(t, c, pip); code != 0 {
			t.Errorf("image-check exit %d, want 0:\n%s", code, out)
		}
		c.waitRunning(1, 4*time.Minute)
		res, out := c.job(1, 2*time.Minute)
		checkJob(t, res, out, 1, version)
	})
	t.Run("the agent built in", func(t *testing.T) {
		image := withBuiltInAgent(t, pip)
		c := startRayClusterImage(t, version, image, rvtest.RayPython(t, version), 1, 1, nil)
		c.waitRunning(1, 4*time.Minute)
		res, out := c.job(1, 2*time.Minute)
		checkJob(t, res, out, 1, version)
		m, err := c.admin.Metrics(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m, "\nrayvast_agent_downloads_total 0\n") {
			t.Errorf("the node fetched the agent though its image holds it:\n%s", m)
		}
	})
	t.Run("another Ray", func(t *testing.T) {
		c := startRayClusterImage(t, other, pip, rvtest.RayPython(t, other), 1, 1, nil)
		code, out := imageCheck(t, c, pip)
		if code != 1 || !strings.Contains(out, "ray") {
			t.Errorf("image-check of Ray %s's image under Ray %s: exit %d, want 1 on the ray row:\n%s", version, other, code, out)
		}
		var why string
		waitFor(t, 4*time.Minute, "the rental rejected", func() (bool, string) {
			cs, _ := c.admin.Candidates(context.Background())
			for _, cd := range cs {
				if cd.Reason != "" {
					why = cd.Reason
					return true, why
				}
			}
			return false, fmt.Sprint(len(cs), " candidates, none ended")
		})
		if why != wire.ReasonRayVersion {
			t.Errorf("the rental ended %q, want %q", why, wire.ReasonRayVersion)
		}
	})
}

// imageCheck runs head image-check on image with the cluster's config.
func imageCheck(t *testing.T, c *rayCluster, image string) (int, string) {
	t.Helper()
	out, err := exec.Command(suite.head, "image-check", "--config", c.cfgPath, image).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("head image-check: %v", err)
	}
	t.Logf("head image-check %s:\n%s", image, out)
	return 0, string(out)
}

// rayByPip is docs/own-image.md's first recipe: Debian's python3 (the
// debootstrap base, with python3-venv), a venv at /opt/venv (a place the
// bootloader looks) and `pip install ray[default]==version`, from the
// wheel folder (no package index here).
func rayByPip(t *testing.T, version string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	base, err := candidateimage.Base(ctx, candidateimage.Config{Engine: suite.eng, Packages: []string{"python3-venv"}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	name := derive(ctx, t, base, "rayvast-e2e-ray-by-pip", map[string]string{"/wheels": rayenv.SharedWheels(suite.repo)},
		"python3 -m venv /opt/venv && /opt/venv/bin/pip install -q --no-index --find-links /wheels 'ray[default]=="+version+"' && rm -rf /wheels")
	t.Logf("%s (Ray %s by pip) built in %s", name, version, time.Since(start).Round(time.Second))
	return name
}

// withBuiltInAgent is base with the agent the head serves at
// /opt/rayvast/agent, as the recipe's `COPY agent /opt/rayvast/agent` does.
func withBuiltInAgent(t *testing.T, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	agent, err := os.ReadFile(suite.agent)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent"), agent, 0o755); err != nil {
		t.Fatal(err)
	}
	return derive(ctx, t, base, "rayvast-e2e-agent-built-in", map[string]string{"/opt/rayvast": dir}, "")
}

// derive commits base with each host dir copied to its path in the image
// (dirs: image path → host dir) and script run, as a Dockerfile's COPY and
// RUN would; the image is removed when the test ends.
func derive(ctx context.Context, t *testing.T, base, repo string, dirs map[string]string, script string) string {
	t.Helper()
	if script == "" {
		script = "true"
	}
	id, err := suite.eng.CreateContainer(ctx, "", dockerengine.ContainerConfig{Image: base, Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"set -e\n" + script}})
	if err != nil {
		t.Fatal(err)
	}
	defer suite.eng.RemoveContainer(context.Background(), id, true)
	for at, dir := range dirs {
		tarDir(ctx, t, id, dir, at)
	}
	if err := suite.eng.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if code, err := suite.eng.WaitContainer(ctx, id); err != nil || code != 0 {
		_, serr, _ := suite.eng.ContainerLogs(ctx, id)
		t.Fatalf("build %s: exit %d, %v: %s", repo, code, err, serr)
	}
	name := fmt.Sprintf("%s:%d", repo, time.Now().UnixNano()%1e9)
	if _, err := suite.eng.Commit(ctx, id, repo, strings.TrimPrefix(name, repo+":"), []string{`ENTRYPOINT []`, `CMD ["/bin/sh"]`}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { suite.eng.RemoveImage(context.Background(), name, true) })
	return name
}

// tarDir streams the host dir into the container at path (made if missing).
func tarDir(ctx context.Context, t *testing.T, id, dir, path string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "--owner=0", "--group=0",
		"--transform", "s,^\\.,"+strings.TrimPrefix(path, "/")+",", "-C", dir, "-cf", "-", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tar %s: %v", dir, err)
	}
	if err := suite.eng.PutArchive(ctx, id, "/", bytes.NewReader(out)); err != nil {
		t.Fatal(err)
	}
}
