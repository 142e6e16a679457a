// Package rayenv makes (or finds) a Python virtual environment with real Ray
// in it: the Ray head's Python for `head up` and `head demo`, the Ray the
// candidate image carries, and the Ray the tests run. One venv per Ray
// version, under one cache dir, built under a temporary name and renamed
// into place, so a killed build leaves nothing that looks finished.
package rayenv

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The Ray versions this project is tested with: the oldest it supports
// (token auth arrived in 2.52) and the newest release. Both are in the
// shared wheel folder CI installs from.
const (
	Oldest = "2.52.1"
	Newest = "2.60.0"
)

// PythonMinor is the Python every Ray node of the cluster runs: Ray refuses
// a driver or node whose Python differs from the cluster's, the candidate
// image's Debian bookworm ships 3.11, and the shared wheels are cp311.
const PythonMinor = "3.11"

// MarkFile marks a finished venv (written last); its content names what
// went in: "ray VERSION", then one installed distribution per line.
const MarkFile = ".rayvast-complete"

// Config says which venv to make and from where.
type Config struct {
	// Dir is the venv's directory (default: Dir(Version)).
	Dir     string
	Version string // Ray's version, e.g. "2.60.0"
	// Wheels is a local folder of wheels (pip --no-index --find-links);
	// empty: the package index.
	Wheels string
	// Python makes the venv (default: FindPython()).
	Python string
	Log    *slog.Logger
}

var versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)

// Root is the cache dir holding one venv per version: $RAYVAST_RAY_VENVS,
// else $XDG_CACHE_HOME/rayvast/ray, else ~/.cache/rayvast/ray.
func Root() string {
	if d := os.Getenv("RAYVAST_RAY_VENVS"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "rayvast", "ray")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "rayvast", "ray")
}

// Dir is the default venv dir of a Ray version.
func Dir(version string) string { return filepath.Join(Root(), version) }

// PythonOf is the venv's Python. It stays the venv's own path (not the
// interpreter it links to): Python finds the venv's site-packages from it.
func PythonOf(dir string) string { return filepath.Join(dir, "bin", "python") }

// Ready reports whether dir holds a finished venv of version.
func Ready(dir, version string) bool {
	b, err := os.ReadFile(filepath.Join(dir, MarkFile))
	return err == nil && strings.HasPrefix(string(b), "ray "+version+"\n")
}

// Ensure returns the Python of a venv with ray[default]==Version, making
// the venv when it is missing or unfinished.
func Ensure(ctx context.Context, cfg Config) (string, error) {
	if !versionRE.MatchString(cfg.Version) {
		return "", fmt.Errorf("ray venv: version %q is not X.Y.Z", cfg.Version)
	}
	if cfg.Dir == "" {
		cfg.Dir = Dir(cfg.Version)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if Ready(cfg.Dir, cfg.Version) {
		return PythonOf(cfg.Dir), nil
	}
	if cfg.Wheels != "" {
		abs, err := filepath.Abs(cfg.Wheels)
		if err != nil {
			return "", fmt.Errorf("ray venv: %w", err)
		}
		cfg.Wheels = abs
		if st, err := os.Stat(cfg.Wheels); err != nil || !st.IsDir() {
			return "", fmt.Errorf("ray venv: wheel folder %s: not a directory", cfg.Wheels)
		}
	}
	if cfg.Python == "" {
		p, err := FindPython(ctx)
		if err != nil {
			return "", err
		}
		cfg.Python = p
	}
	if err := build(ctx, cfg); err != nil {
		return "", err
	}
	return PythonOf(cfg.Dir), nil
}

// build makes the venv under a temporary name beside Dir, then renames it.
// A venv's scripts name their own path, so the venv is made at its final
// path: the temporary name is only for a previous build's remains.
func build(ctx context.Context, cfg Config) error {
	start := time.Now()
	if err := os.MkdirAll(filepath.Dir(cfg.Dir), 0o755); err != nil {
		return fmt.Errorf("ray venv: %w", err)
	}
	// An unfinished venv (killed build) is moved aside and removed.
	if _, err := os.Stat(cfg.Dir); err == nil {
		old := fmt.Sprintf("%s.stale-%d", cfg.Dir, os.Getpid())
		if err := os.Rename(cfg.Dir, old); err != nil {
			return fmt.Errorf("ray venv: %w", err)
		}
		defer os.RemoveAll(old)
	}
	source := "the package index"
	if cfg.Wheels != "" {
		source = cfg.Wheels
	}
	cfg.Log.Info("making a Python venv with Ray (once per version, about 20 s)", "ray", cfg.Version, "dir", cfg.Dir, "from", source)
	if err := runLogged(ctx, cfg.Python, "-m", "venv", cfg.Dir); err != nil {
		return fmt.Errorf("ray venv: %s -m venv: %w (Debian: apt-get install python3-venv)", cfg.Python, err)
	}
	pip := []string{PythonOf(cfg.Dir), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"}
	if cfg.Wheels != "" {
		pip = append(pip, "--no-index", "--find-links", cfg.Wheels)
	}
	pip = append(pip, "ray[default]=="+cfg.Version)
	if err := runLogged(ctx, pip[0], pip[1:]...); err != nil {
		return fmt.Errorf("ray venv: pip install ray[default]==%s from %s: %w", cfg.Version, source, err)
	}
	got, err := Version(ctx, PythonOf(cfg.Dir))
	if err != nil {
		return fmt.Errorf("ray venv: %w", err)
	}
	if got != cfg.Version {
		return fmt.Errorf("ray venv: installed ray %s, want %s", got, cfg.Version)
	}
	dists, err := Dists(cfg.Dir)
	if err != nil {
		return fmt.Errorf("ray venv: %w", err)
	}
	mark := "ray " + cfg.Version + "\n" + strings.Join(dists, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(cfg.Dir, MarkFile), []byte(mark), 0o644); err != nil {
		return fmt.Errorf("ray venv: %w", err)
	}
	cfg.Log.Info("Ray venv ready", "ray", cfg.Version, "python", PythonOf(cfg.Dir), "took", time.Since(start).Round(time.Second))
	return nil
}

func runLogged(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	// PYTHONDONTWRITEBYTECODE cleared: pip then compiles Ray's modules once
	// here, and the candidate image carries the byte code (a Ray process
	// imports hundreds of modules at every start).
	cmd.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s", err, tail(out.String(), 1500))
	}
	return nil
}

// Version asks a Python for its ray.__version__.
func Version(ctx context.Context, python string) (string, error) {
	out, err := exec.CommandContext(ctx, python, "-c", "import ray; print(ray.__version__)").Output()
	if err != nil {
		return "", fmt.Errorf("%s: import ray: %w", python, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// FindPython returns a Python 3.11 to make venvs with: Debian's own first
// (the candidate image's Python is Debian's), then any python3.11 or
// python3 on PATH that says it is 3.11.
func FindPython(ctx context.Context) (string, error) {
	var seen []string
	for _, c := range []string{"/usr/bin/python" + PythonMinor, "python" + PythonMinor, "/usr/bin/python3", "python3"} {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		out, err := exec.CommandContext(ctx, p, "-c", "import sys, ensurepip; print('%d.%d' % sys.version_info[:2])").Output()
		got := strings.TrimSpace(string(out))
		if err == nil && got == PythonMinor {
			return p, nil
		}
		if err != nil {
			got = "no venv support (ensurepip)"
		}
		seen = append(seen, p+": "+got)
	}
	return "", fmt.Errorf("ray venv: no Python %s with venv support (tried %s); Debian: apt-get install python3 python3-venv",
		PythonMinor, strings.Join(seen, ", "))
}

// SitePackages is the venv's site-packages dir.
func SitePackages(dir string) (string, error) {
	m, err := filepath.Glob(filepath.Join(dir, "lib", "python3.*", "site-packages"))
	if err != nil || len(m) != 1 {
		return "", fmt.Errorf("ray venv %s: want one lib/python3.*/site-packages, found %d", dir, len(m))
	}
	return m[0], nil
}

// Dists lists the venv's installed distributions (name-version, from the
// .dist-info dirs), sorted: what went in, for image tags and the marker.
func Dists(dir string) ([]string, error) {
	sp, err := SitePackages(dir)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(sp)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".dist-info"); ok && e.IsDir() {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ray venv %s: no installed distributions", dir)
	}
	sort.Strings(out)
	return out, nil
}

// SharedWheels finds the shared wheel folder beside a checkout (root is
// the repo root): $RAYVAST_RAY_WHEELS, else ROOT/../shared/wheels; "" when
// neither exists.
func SharedWheels(root string) string {
	for _, d := range []string{os.Getenv("RAYVAST_RAY_WHEELS"), filepath.Join(root, "..", "shared", "wheels")} {
		if d == "" {
			continue
		}
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			if abs, err := filepath.Abs(d); err == nil {
				return abs
			}
		}
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
