package candidateimage

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The fallback base image, for machines where debootstrap is missing or
// cannot reach a Debian mirror: the host's own python3 (executable, shared
// libraries found with ldd, standard library) and shell tools, copied at
// their host paths. It is what the bootloader and the stand-in Ray need:
// a POSIX sh, mktemp/chmod/rm/sleep/wc, and a Python with ssl and urllib.

// hostPython is what the host's Python says about itself.
type hostPython struct {
	Executable string `json:"executable"`
	Version    string `json:"version"`
	Stdlib     string `json:"stdlib"`
	Platstdlib string `json:"platstdlib"`
	Purelib    string `json:"purelib"`
}

const pythonProbe = `import json,sys,sysconfig,os
p=sysconfig.get_paths()
print(json.dumps({"executable":os.path.realpath(sys.executable),"version":sys.version,"stdlib":p["stdlib"],"platstdlib":p["platstdlib"],"purelib":p["purelib"]}))`

// findHostPython prefers the system Python over a user's (pyenv, conda).
func findHostPython(ctx context.Context) (hostPython, error) {
	var hp hostPython
	var errs []string
	for _, c := range []string{"/usr/bin/python3", "/usr/local/bin/python3", "python3"} {
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		out, err := exec.CommandContext(ctx, path, "-I", "-c", pythonProbe).Output()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		if err := json.Unmarshal(out, &hp); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		if err := exec.CommandContext(ctx, path, "-I", "-c", "import ssl, urllib.request, hashlib").Run(); err != nil {
			errs = append(errs, fmt.Sprintf("%s: no ssl/urllib: %v", path, err))
			continue
		}
		return hp, nil
	}
	return hp, fmt.Errorf("no usable host python3 (%s)", strings.Join(errs, "; "))
}

// hostTools are the shell and commands bootloader.sh runs.
var hostTools = []string{"sh", "mktemp", "chmod", "rm", "sleep", "wc", "cat", "ls", "mkdir", "env", "id", "grep"}

// hostBaseTag hashes what the fallback copies: the recipe, the Python's
// identity, the tools' paths and sizes.
func hostBaseTag(hp hostPython) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00host\x00%s\x00%s\x00", imageRecipe, hp.Executable, hp.Version)
	for _, t := range hostTools {
		if p, err := exec.LookPath(t); err == nil {
			if st, err := os.Stat(p); err == nil {
				fmt.Fprintf(h, "%s\x00%d\x00", p, st.Size())
			}
		}
	}
	return "host-" + hex.EncodeToString(h.Sum(nil)[:5])
}

// buildHostBase imports the fallback base image as name.
func buildHostBase(ctx context.Context, cfg Config, hp hostPython, name string) error {
	start := time.Now()
	files := map[string]bool{} // host paths to copy (dereferenced)
	links := map[string]string{}
	addWithLibs := func(p string) error {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		files[real] = true
		if real != p {
			links[p] = real
		}
		libs, err := lddLibs(ctx, real)
		if err != nil {
			return err
		}
		for _, l := range libs {
			files[l] = true
		}
		return nil
	}
	if err := addWithLibs(hp.Executable); err != nil {
		return fmt.Errorf("build host base image: %w", err)
	}
	for _, t := range hostTools {
		p, err := exec.LookPath(t)
		if err != nil {
			return fmt.Errorf("build host base image: %s: %w", t, err)
		}
		if err := addWithLibs(p); err != nil {
			return fmt.Errorf("build host base image: %w", err)
		}
		real, _ := filepath.EvalSymlinks(p)
		// Where the bootloader's PATH finds it.
		for _, dir := range []string{"/bin", "/usr/bin"} {
			if l := filepath.Join(dir, t); l != real {
				links[l] = real
			}
		}
	}
	for _, dir := range uniq(hp.Stdlib, hp.Platstdlib) {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable corners are not needed
			}
			n := d.Name()
			if d.IsDir() && p != dir && (n == "test" || n == "tests" || n == "__pycache__" || n == "idlelib" ||
				n == "tkinter" || n == "turtledemo" || n == "ensurepip" || n == "site-packages" || n == "dist-packages" || n == "config-3.11-x86_64-linux-gnu") {
				return filepath.SkipDir
			}
			if d.IsDir() {
				return nil
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // a dangling link (Debian's sitecustomize.py): skip
			}
			if st, err := os.Stat(real); err != nil || !st.Mode().IsRegular() {
				return nil
			}
			files[p] = true
			if strings.HasSuffix(n, ".so") {
				libs, err := lddLibs(ctx, p)
				if err == nil {
					for _, l := range libs {
						files[l] = true
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("build host base image: %w", err)
		}
	}
	if hp.Executable != "/usr/local/bin/python3" {
		links["/usr/local/bin/python3"] = hp.Executable
	}

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeHostTar(pw, files, links)) }()
	repo, tag, _ := strings.Cut(name, ":")
	err := cfg.Engine.ImportImage(ctx, pr, repo, tag, []string{
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"ENV HOME=/root",
		`CMD ["/bin/sh"]`,
		"LABEL rayvast.image=base",
		"LABEL rayvast.image.sitedir=" + hp.Purelib,
		"LABEL rayvast.image.python=" + strings.Fields(hp.Version + " ?")[0],
	})
	pr.Close()
	if err != nil {
		return fmt.Errorf("build host base image: %w", err)
	}
	cfg.Log.Info("base image built from the host's files", "image", name, "python", hp.Executable, "files", len(files), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// lddLibs lists the shared libraries (and the loader) a binary needs.
func lddLibs(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		// "not a dynamic executable": a static binary needs nothing.
		return nil, nil
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		for _, w := range f {
			if strings.HasPrefix(w, "/") {
				libs = append(libs, w)
				break
			}
		}
	}
	return libs, nil
}

func uniq(s ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if x != "" && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// writeHostTar writes the files (content dereferenced, host mode kept), the
// links, and the directories a container expects.
func writeHostTar(w io.Writer, files map[string]bool, links map[string]string) error {
	tw := tar.NewWriter(w)
	mtime := time.Unix(0, 0)
	dirs := map[string]bool{}
	mkdir := func(d string, mode int64) error {
		d = strings.Trim(d, "/")
		if d == "" || d == "." {
			return nil
		}
		var parts []string
		for _, p := range strings.Split(d, "/") {
			parts = append(parts, p)
			dd := strings.Join(parts, "/") + "/"
			if dirs[dd] {
				continue
			}
			dirs[dd] = true
			m := int64(0o755)
			if dd == d+"/" {
				m = mode
			}
			if err := tw.WriteHeader(&tar.Header{Name: dd, Typeflag: tar.TypeDir, Mode: m, ModTime: mtime}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range []struct {
		path string
		mode int64
	}{{"tmp", 0o1777}, {"var/tmp", 0o1777}, {"root", 0o700}, {"run", 0o755}, {"etc", 0o755}, {"opt", 0o755}, {"usr/local/bin", 0o755}} {
		if err := mkdir(d.path, d.mode); err != nil {
			return err
		}
	}
	etc := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
	}
	for _, p := range slices.Sorted(maps.Keys(etc)) {
		if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(etc[p])), ModTime: mtime}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, etc[p]); err != nil {
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if _, isLink := links[p]; isLink {
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if err := mkdir(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(p, "/"), Typeflag: tar.TypeReg, Mode: int64(st.Mode().Perm()), Size: st.Size(), ModTime: mtime})
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("tar %s: %w", p, err)
		}
	}
	for _, l := range slices.Sorted(maps.Keys(links)) {
		if links[l] == l {
			continue
		}
		if err := mkdir(filepath.Dir(l), 0o755); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(l, "/"), Typeflag: tar.TypeSymlink, Linkname: links[l], Mode: 0o777, ModTime: mtime}); err != nil {
			return err
		}
	}
	return tw.Close()
}
