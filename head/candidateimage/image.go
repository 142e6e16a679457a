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
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/dockerengine"
)

// Image repositories. Tags are hashes of the inputs, so an image is built
// once per machine and rebuilt only when what goes into it changes.
const (
	BaseRepo      = "rayvast-base"      // Debian minbase + python3
	CandidateRepo = "rayvast-candidate" // base + the stand-in ray package
)

// Where the stand-in ray package goes in the image, and the .pth file that
// puts it on every Python's sys.path (so `python3 -c 'import ray'` works
// with no PYTHONPATH in the rental env).
const (
	fakerayDir  = "/opt/fakeray"
	fakerayPth  = "/usr/lib/python3/dist-packages/rayvast-fakeray.pth"
	imageRecipe = "rayvast image recipe 2" // bump when the build steps change
)

// EnvRayWheels names a folder of Ray's wheels for Config.RayWheels: the
// head reads it for the image it builds (head/provider_settings.go).
const EnvRayWheels = "RAYVAST_RAY_WHEELS"

// Config says how to build the candidate image.
type Config struct {
	Engine *dockerengine.Client
	// FakerayDir is the stand-in ray package directory (the repo's
	// test/fakeray; it holds ray/). Empty: FindFakeray.
	FakerayDir string
	// Suite and Mirror are debootstrap's (default bookworm, deb.debian.org).
	Suite, Mirror string
	// Packages are Debian packages the debootstrap base holds besides
	// python3 (the training tests' python3-torch): part of the base's tag.
	Packages []string
	// Env is extra KEY=value baked into the image config (tests use it for
	// FAKERAY_* knobs); part of the tag's hash.
	Env []string
	// Debootstrap is the debootstrap binary (default "debootstrap" on PATH).
	Debootstrap string
	// Base chooses the base image: "" (debootstrap, else the host's
	// files), BaseDebootstrap or BaseHost.
	Base string
	// RayVersion puts real Ray (ray[default]) of that version in the
	// image instead of the stand-in; "" is the stand-in (FakerayDir).
	// RayWheels is where its wheels come from: a local folder, or ""
	// for the package index. RayVenvDir is the venv on this machine the
	// image's Ray is copied from (default: rayenv's cache dir).
	RayVersion, RayWheels, RayVenvDir string
	Log                               *slog.Logger
}

func (c *Config) defaults() error {
	if c.Engine == nil {
		c.Engine = dockerengine.New("")
	}
	if c.Suite == "" {
		c.Suite = "bookworm"
	}
	if c.Mirror == "" {
		c.Mirror = "http://deb.debian.org/debian"
	}
	if c.Debootstrap == "" {
		c.Debootstrap = "debootstrap"
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Base image kinds of Config.Base.
const (
	BaseDebootstrap = "debootstrap"
	BaseHost        = "host"
)

// FindFakeray finds the stand-in ray package: ./test/fakeray (a user in the
// repo root), then next to the running binary (bin/../test/fakeray).
func FindFakeray() (string, error) {
	var tried []string
	cands := []string{"test/fakeray"}
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(exe), "..", "test", "fakeray"))
	}
	for _, d := range cands {
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		tried = append(tried, abs)
		if st, err := os.Stat(filepath.Join(abs, "ray", "__init__.py")); err == nil && st.Mode().IsRegular() {
			return abs, nil
		}
	}
	return "", fmt.Errorf("find fakeray: no ray/__init__.py under %s (run from the repo root)", strings.Join(tried, " or "))
}

// Base returns the debootstrap base image (Debian's python3 and
// cfg.Packages, nothing of Ray or rayvast), building it when missing: what a
// test builds a user's own image from.
func Base(ctx context.Context, cfg Config) (string, error) {
	if err := cfg.defaults(); err != nil {
		return "", err
	}
	cfg.Base = BaseDebootstrap
	return ensureBase(ctx, cfg)
}

// Build returns the candidate image's name (repo:tag), building what is
// missing: the base image (debootstrap, slow, once per machine) and the
// candidate image (base + real Ray from a venv of this machine, or base +
// the stand-in fakeray; seconds).
func Build(ctx context.Context, cfg Config) (string, error) {
	if err := cfg.defaults(); err != nil {
		return "", err
	}
	if cfg.FakerayDir == "" && cfg.RayVersion == "" {
		d, err := FindFakeray()
		if err != nil {
			return "", err
		}
		cfg.FakerayDir = d
	}
	if cfg.RayVersion != "" {
		// Real Ray needs a whole Debian (libstdc++ and the rest of what
		// its raylet and wheels link); the host-files base has only what
		// the bootloader and the stand-in use.
		switch cfg.Base {
		case "":
			cfg.Base = BaseDebootstrap
		case BaseHost:
			return "", errors.New("candidate image: real Ray needs the debootstrap base, not --base host (the host-files base lacks the libraries Ray links)")
		}
	}
	if len(cfg.Packages) > 0 && cfg.Base != BaseDebootstrap {
		return "", errors.New("candidate image: extra Debian packages need the debootstrap base and real Ray")
	}
	base, err := ensureBase(ctx, cfg)
	if err != nil {
		return "", err
	}
	if cfg.RayVersion != "" {
		return buildRayImage(ctx, cfg, base)
	}
	if err := buildNatives(ctx, cfg.FakerayDir); err != nil {
		return "", err
	}
	files, err := readTree(cfg.FakerayDir)
	if err != nil {
		return "", err
	}
	tag := candidateTag(base, files, cfg.Env)
	name := CandidateRepo + ":" + tag
	if _, err := cfg.Engine.InspectImage(ctx, name); err == nil {
		return name, nil
	} else if !errors.Is(err, dockerengine.ErrNotFound) {
		return "", err
	}
	if err := buildCandidate(ctx, cfg, base, tag, files); err != nil {
		return "", err
	}
	return name, nil
}

// ensureBase returns a base image, cached or built: a debootstrap one
// first, the host-files one when debootstrap is missing or fails.
func ensureBase(ctx context.Context, cfg Config) (string, error) {
	deb := BaseRepo + ":" + baseTag(cfg.Suite, cfg.Mirror, cfg.Packages)
	exists := func(name string) (bool, error) {
		_, err := cfg.Engine.InspectImage(ctx, name)
		if errors.Is(err, dockerengine.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	if cfg.Base != BaseHost {
		if ok, err := exists(deb); ok || err != nil {
			return deb, err
		}
	}
	// A cached host-files base never stands in for a Debian one that
	// could still be built: it lacks Debian's tools (mv, ln) and layout,
	// and once built by one caller (a test that asks for it, a machine
	// that lacked debootstrap then) it would otherwise win for good.
	var debErr error
	if cfg.Base != BaseHost {
		if debErr = buildBase(ctx, cfg, deb); debErr == nil {
			return deb, nil
		}
		if cfg.Base == BaseDebootstrap || ctx.Err() != nil {
			return "", debErr
		}
	}
	hp, hpErr := findHostPython(ctx)
	if hpErr != nil && debErr == nil {
		return "", fmt.Errorf("no base image: %w", hpErr)
	}
	if hpErr != nil {
		return "", fmt.Errorf("no base image: %v; and %w", debErr, hpErr)
	}
	host := BaseRepo + ":" + hostBaseTag(hp)
	if ok, err := exists(host); ok || err != nil {
		return host, err
	}
	if debErr != nil {
		cfg.Log.Warn("debootstrap failed; building the base image from the host's own python3 and tools instead", "err", debErr)
	}
	if err := buildHostBase(ctx, cfg, hp, host); err != nil {
		return "", err
	}
	return host, nil
}

// baseTag hashes debootstrap's inputs.
func baseTag(suite, mirror string, packages []string) string {
	h := sha256.Sum256([]byte(imageRecipe + "\x00debootstrap --variant=minbase " + includeFlag(packages) + "\x00" + suite + "\x00" + mirror))
	return hex.EncodeToString(h[:6])
}

// includeFlag is debootstrap's --include: python3 and the extra packages.
func includeFlag(packages []string) string {
	return "--include=" + strings.Join(append([]string{"python3"}, packages...), ",")
}

// candidateTag hashes the base, every fakeray file (path and bytes) and the
// extra env.
func candidateTag(base string, files []treeFile, env []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", imageRecipe, base)
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", f.rel, f.mode, len(f.data))
		h.Write(f.data)
	}
	for _, e := range env {
		fmt.Fprintf(h, "env\x00%s\x00", e)
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
}

type treeFile struct {
	rel  string // slash path under the tree
	mode fs.FileMode
	data []byte
}

// readTree reads the regular files of dir (sorted; caches and hidden files
// left out, so a test run that wrote __pycache__ does not change the tag).
func readTree(dir string) ([]treeFile, error) {
	var files []treeFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != dir && (strings.HasPrefix(name, ".") || name == "__pycache__") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		mode := fs.FileMode(0o644)
		if info, err := d.Info(); err == nil && info.Mode()&0o111 != 0 {
			mode = 0o755 // the stand-in's native raylet and core worker
		}
		files = append(files, treeFile{rel: filepath.ToSlash(rel), mode: mode, data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read fakeray %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	return files, nil
}

// buildNatives runs the stand-in's build-natives.sh (when the dir has one)
// so its native raylet and core worker exist before the tree is copied:
// they are built on this host (glibc, like the bookworm base) and never
// committed. The script rebuilds only what is stale.
func buildNatives(ctx context.Context, dir string) error {
	script := filepath.Join(dir, "build-natives.sh")
	if _, err := os.Stat(script); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "sh", script).CombinedOutput(); err != nil {
		return fmt.Errorf("build fakeray natives %s: %w: %s", script, err, tail(string(out), 2000))
	}
	return nil
}

// buildBase debootstraps a minimal Debian with python3, trims it and imports
// it as the base image.
func buildBase(ctx context.Context, cfg Config, name string) error {
	start := time.Now()
	if _, err := exec.LookPath(cfg.Debootstrap); err != nil {
		return fmt.Errorf("build base image: %w (install it: apt-get install debootstrap)", err)
	}
	tmp, err := os.MkdirTemp("", "rayvast-rootfs-")
	if err != nil {
		return fmt.Errorf("build base image: %w", err)
	}
	defer func() {
		// A debootstrap that died mid-way may leave proc or sys mounted
		// in the rootfs: never recurse into them.
		unmountUnder(tmp)
		_ = os.RemoveAll(tmp)
	}()
	root := filepath.Join(tmp, "rootfs")
	cfg.Log.Info("building base image (debootstrap, about a minute, once per machine)", "image", name, "suite", cfg.Suite, "mirror", cfg.Mirror)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, cfg.Debootstrap, "--variant=minbase", includeFlag(cfg.Packages), cfg.Suite, root, cfg.Mirror)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build base image: debootstrap: %w\n%s", err, tail(out.String(), 2000))
	}
	// What a container never needs: package caches and lists, docs, locales.
	for _, p := range []string{"var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info"} {
		if err := clearDir(filepath.Join(root, p)); err != nil {
			return fmt.Errorf("build base image: trim: %w", err)
		}
	}
	// GNU tar keeps hard links, devices and owners exactly; /dev, /proc
	// and /sys contents are the runtime's business.
	tarCmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "-C", root,
		"--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "-cf", "-", ".")
	stream, err := tarCmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("build base image: %w", err)
	}
	var tarErr bytes.Buffer
	tarCmd.Stderr = &tarErr
	if err := tarCmd.Start(); err != nil {
		return fmt.Errorf("build base image: tar: %w", err)
	}
	repo, tag, _ := strings.Cut(name, ":")
	impErr := cfg.Engine.ImportImage(ctx, stream, repo, tag, []string{
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		`CMD ["/bin/sh"]`,
		"LABEL rayvast.image=base",
	})
	_, _ = io.Copy(io.Discard, stream)
	if err := tarCmd.Wait(); err != nil {
		return fmt.Errorf("build base image: tar: %w: %s", err, tarErr.String())
	}
	if impErr != nil {
		return fmt.Errorf("build base image: %w", impErr)
	}
	cfg.Log.Info("base image built", "image", name, "took", time.Since(start).Round(time.Second))
	return nil
}

// buildCandidate copies fakeray into a container of the base image and
// commits it.
func buildCandidate(ctx context.Context, cfg Config, base, tag string, files []treeFile) error {
	pth := fakerayPth
	if info, err := cfg.Engine.InspectImage(ctx, base); err == nil && info.Config.Labels["rayvast.image.sitedir"] != "" {
		pth = info.Config.Labels["rayvast.image.sitedir"] + "/rayvast-fakeray.pth"
	}
	arch, err := fakerayTar(files, pth)
	if err != nil {
		return fmt.Errorf("build candidate image: %w", err)
	}
	err = commitCandidate(ctx, cfg, base, tag, nil, func(id string) error {
		return cfg.Engine.PutArchive(ctx, id, "/", bytes.NewReader(arch))
	})
	if err != nil {
		return err
	}
	cfg.Log.Info("candidate image built", "image", CandidateRepo+":"+tag, "fakeray", cfg.FakerayDir)
	return nil
}

// commitCandidate makes CandidateRepo:tag from a stopped container of base
// that put fills, with the candidate's labels (and extra ones) and
// cfg.Env; the container is removed either way.
func commitCandidate(ctx context.Context, cfg Config, base, tag string, labels []string, put func(id string) error) error {
	id, err := cfg.Engine.CreateContainer(ctx, "", dockerengine.ContainerConfig{
		Image: base, Cmd: []string{"/bin/true"},
		Labels:     map[string]string{"rayvast.image": "build"},
		HostConfig: dockerengine.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		return fmt.Errorf("build candidate image: %w", err)
	}
	defer func() { _ = cfg.Engine.RemoveContainer(context.WithoutCancel(ctx), id, true) }()
	if err := put(id); err != nil {
		return fmt.Errorf("build candidate image: %w", err)
	}
	changes := []string{"LABEL rayvast.image=candidate", "LABEL rayvast.image.base=" + base}
	for _, l := range labels {
		changes = append(changes, "LABEL "+l)
	}
	for _, e := range cfg.Env {
		changes = append(changes, "ENV "+e)
	}
	if _, err := cfg.Engine.Commit(ctx, id, CandidateRepo, tag, changes); err != nil {
		return fmt.Errorf("build candidate image: %w", err)
	}
	return nil
}

// fakerayTar lays out /opt/fakeray/… and the .pth file as a tar for "/".
func fakerayTar(files []treeFile, pth string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	dirs := map[string]bool{}
	addDir := func(d string) error {
		var parts []string
		for _, p := range strings.Split(strings.Trim(d, "/"), "/") {
			parts = append(parts, p)
			dd := strings.Join(parts, "/") + "/"
			if dirs[dd] {
				continue
			}
			dirs[dd] = true
			if err := tw.WriteHeader(&tar.Header{Name: dd, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
				return err
			}
		}
		return nil
	}
	addFile := func(p string, data []byte, mode fs.FileMode) error {
		if err := addDir(filepath.ToSlash(filepath.Dir(p))); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(p, "/"), Typeflag: tar.TypeReg, Mode: int64(mode), Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, f := range files {
		if err := addFile(fakerayDir+"/"+f.rel, f.data, f.mode); err != nil {
			return nil, err
		}
	}
	if err := addFile(pth, []byte(fakerayDir+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func clearDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
