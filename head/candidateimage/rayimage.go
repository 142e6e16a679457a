package candidateimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rayenv"
)

// Where real Ray goes in the candidate image: the site-packages of a venv
// made on this machine (rayenv), and a .pth file in the image Python's
// site dir that adds it as a site dir (so the .pth files inside it run too,
// and `python3 -c 'import ray'` works with no PYTHONPATH in the rental env,
// as in an image with Ray pip-installed).
const (
	raySiteDir    = "/opt/ray/site-packages"
	rayPthName    = "rayvast-ray.pth"
	debianSiteDir = "/usr/lib/python3/dist-packages"                              // the debootstrap base's Python reads .pth files here
	rayRecipe     = "ray 3: site-packages with byte code, before the image's own" // bump when the Ray layer's steps change
)

// buildRayImage returns the candidate image with real Ray (cfg.RayVersion
// from cfg.RayWheels, or the package index), building what is missing.
func buildRayImage(ctx context.Context, cfg Config, base string) (string, error) {
	venv := cfg.RayVenvDir
	if venv == "" {
		venv = rayenv.Dir(cfg.RayVersion)
	}
	if _, err := rayenv.Ensure(ctx, rayenv.Config{Dir: venv, Version: cfg.RayVersion, Wheels: cfg.RayWheels, Log: cfg.Log}); err != nil {
		return "", fmt.Errorf("candidate image with Ray %s: %w", cfg.RayVersion, err)
	}
	site, err := rayenv.SitePackages(venv)
	if err != nil {
		return "", err
	}
	dists, err := rayenv.Dists(venv)
	if err != nil {
		return "", err
	}
	pth := debianSiteDir + "/" + rayPthName
	info, err := cfg.Engine.InspectImage(ctx, base)
	if err != nil {
		return "", fmt.Errorf("candidate image: %w", err)
	}
	if d := info.Config.Labels["rayvast.image.sitedir"]; d != "" {
		pth = d + "/" + rayPthName
	}
	if py := info.Config.Labels["rayvast.image.python"]; py != "" && !strings.HasPrefix(py, rayenv.PythonMinor+".") {
		return "", fmt.Errorf("candidate image: the base image's Python is %s; real Ray's venv and the cluster need %s", py, rayenv.PythonMinor)
	}
	tag := rayTag(base, cfg.RayVersion, dists, cfg.Env)
	name := CandidateRepo + ":" + tag
	if _, err := cfg.Engine.InspectImage(ctx, name); err == nil {
		return name, nil
	} else if !errors.Is(err, dockerengine.ErrNotFound) {
		return "", err
	}
	start := time.Now()
	cfg.Log.Info("building the candidate image with real Ray (once per Ray version)", "image", name, "ray", cfg.RayVersion)
	skel, err := raySkeleton(pth)
	if err != nil {
		return "", fmt.Errorf("build candidate image: %w", err)
	}
	err = commitCandidate(ctx, cfg, base, tag, []string{"rayvast.image.ray=" + cfg.RayVersion}, func(id string) error {
		if err := cfg.Engine.PutArchive(ctx, id, "/", bytes.NewReader(skel)); err != nil {
			return err
		}
		return putDir(ctx, cfg, id, site, raySiteDir)
	})
	if err != nil {
		return "", err
	}
	cfg.Log.Info("candidate image built", "image", name, "ray", cfg.RayVersion, "took", time.Since(start).Round(time.Second))
	return name, nil
}

// rayTag hashes the base, Ray's version, every distribution in the venv
// (name-version) and the extra env.
func rayTag(base, version string, dists, env []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", imageRecipe, rayRecipe, base, version)
	for _, d := range dists {
		fmt.Fprintf(h, "dist\x00%s\x00", d)
	}
	for _, e := range env {
		fmt.Fprintf(h, "env\x00%s\x00", e)
	}
	return "ray" + version + "-" + hex.EncodeToString(h.Sum(nil)[:5])
}

// raySkeleton is a tar of the site dir's parents and the .pth file.
func raySkeleton(pth string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	for _, d := range []string{"opt/", "opt/ray/", "opt/ray/site-packages/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	// Ray's site dir goes before the one holding the .pth (the image's
	// Debian packages, python3-torch's numpy or typing_extensions among
	// them), as a venv's comes before the system's: Ray runs on the
	// versions it was installed with.
	own := pyQuote(path.Dir(pth))
	data := []byte("import sys, site; n = len(sys.path); site.addsitedir(" + pyQuote(raySiteDir) + "); new = sys.path[n:]; del sys.path[n:]; " +
		"i = sys.path.index(" + own + ") if " + own + " in sys.path else n; sys.path[i:i] = new\n")
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(pth, "/"), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: mtime}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func pyQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// putDir streams the host dir src into the container at dst (which
// exists), with GNU tar: modes (Ray's raylet and GCS server are
// executables), symlinks and mtimes kept. Python's byte-code caches go too:
// the image's Python is the venv's version, the kept mtimes keep them valid,
// and without them every Ray process on a node would compile Ray's modules
// again at each start.
func putDir(ctx context.Context, cfg Config, id, src, dst string) error {
	cmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "--owner=0", "--group=0",
		"-C", src, "-cf", "-", ".")
	stream, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var tarErr bytes.Buffer
	cmd.Stderr = &tarErr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("tar %s: %w", src, err)
	}
	putErr := cfg.Engine.PutArchive(ctx, id, dst, stream)
	_, _ = io.Copy(io.Discard, stream) // let tar finish if the Engine stopped reading
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("tar %s: %w: %s", src, err, tarErr.String())
	}
	return putErr
}
