package imagecheck

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rayvast/rayvast/head/provider/vast"
	"github.com/rayvast/rayvast/head/rayversion"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/wire"
)

// imageRow: the image's platform and size (a fresh vast host pulls it
// before the rental starts: the bigger, the longer a rental bills unused).
func imageRow(info dockerengine.ImageInfo) Check {
	size := fmt.Sprintf("%.1f GB", float64(info.Size)/1e9)
	if info.Size < 1e9 {
		size = fmt.Sprintf("%d MB", info.Size/1e6)
	}
	return Check{"image", OK, fmt.Sprintf("%s/%s, %s unpacked (a host without it pulls it first: large images take 10-60 min)",
		info.Os, info.Architecture, size)}
}

// portsRow: vast counts the image's EXPOSE ports against the 64 a rental
// asks for (head/provider/vast/SOURCES.md), so it gets fewer than the
// agent needs and the head's port check fails.
func portsRow(info dockerengine.ImageInfo) Check {
	ports := make([]string, 0, len(info.Config.ExposedPorts))
	for p := range info.Config.ExposedPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if len(ports) == 0 {
		return Check{"ports", OK, fmt.Sprintf("EXPOSEs nothing: the rental gets its %d ports", wire.PortCount)}
	}
	return Check{"ports", Fail, fmt.Sprintf("EXPOSEs %s: vast counts them against the rental's %d ports, so it gets %d and fails the head's port check; build from a base that EXPOSEs nothing (a Dockerfile cannot remove a base image's EXPOSE)",
		strings.Join(ports, " "), wire.PortCount, max(wire.PortCount-len(ports), 0))}
}

// envCUDA reads CUDA_VERSION (NVIDIA's images set it, e.g. 12.8.1) as
// major.minor.
var envCUDA = regexp.MustCompile(`^(\d+)\.(\d+)`)

// imageCUDA is the CUDA the image is built for: its tag's -cuXYZ (what
// the vast provider reads), else its CUDA_VERSION; 0 when neither says.
func imageCUDA(image string, env []string) (float64, string) {
	if v, ok := vast.TagCUDA(image); ok {
		return v, "tag"
	}
	for _, kv := range env {
		if val, ok := strings.CutPrefix(kv, "CUDA_VERSION="); ok {
			if m := envCUDA.FindStringSubmatch(val); m != nil {
				v, _ := strconv.ParseFloat(m[1]+"."+m[2], 64)
				return v, "CUDA_VERSION"
			}
		}
	}
	return 0, ""
}

// cudaRow: a node type rents hosts whose driver's CUDA (cuda_max_good) is
// at least its filter; an image built for a newer CUDA than that filter
// lets in hosts whose driver cannot run it.
func cudaRow(image string, env []string, filters map[string]float64) Check {
	v, from := imageCUDA(image, env)
	if v == 0 {
		return Check{"cuda", OK, "the image names no CUDA (no -cuXYZ tag, no CUDA_VERSION): the offers' driver floor is the default " + strconv.FormatFloat(vast.DefaultCUDA, 'f', -1, 64)}
	}
	var low []string
	for _, nt := range slices.Sorted(maps.Keys(filters)) {
		if f := filters[nt]; f < v {
			low = append(low, fmt.Sprintf("%s (cuda_max_good %g)", nt, f))
		}
	}
	if len(low) > 0 {
		return Check{"cuda", Fail, fmt.Sprintf("built for CUDA %g (%s), but node types %s also rent hosts whose driver supports less: set their cuda_max_good to %g or more",
			v, from, strings.Join(low, ", "), v)}
	}
	return Check{"cuda", OK, fmt.Sprintf("CUDA %g (%s); every GPU node type's cuda_max_good filter is at least that", v, from)}
}

// containerRows judges what the probe saw in the container.
func containerRows(f facts, cfg Config) []Check {
	rows := []Check{{"sh", OK, "/bin/sh -c runs (as vast starts a rental)"}}
	if len(f.missingTools) > 0 {
		rows = append(rows, Check{"tools", Fail, "the bootloader runs " + strings.Join(f.missingTools, ", ") + ", missing on PATH: install coreutils (or busybox)"})
	} else {
		rows = append(rows, Check{"tools", OK, "mktemp, chmod, rm, sleep, wc on PATH (the bootloader's)"})
	}
	switch {
	case f.tmpExec:
		rows = append(rows, Check{"tmp exec", OK, fmt.Sprintf("mktemp -d gave %s, which allows exec (the bootloader runs the agent from there)", f.tmpDir)})
	case strings.HasPrefix(f.tmpDir, "/"):
		rows = append(rows, Check{"tmp exec", Fail, fmt.Sprintf("the bootloader runs the agent from mktemp -d ($TMPDIR, else /tmp), and %s allows no exec (noexec): set ENV TMPDIR to a writable dir that allows exec", f.tmpDir)})
	default:
		rows = append(rows, Check{"tmp exec", Fail, "the bootloader's mktemp -d failed ($TMPDIR, else /tmp, must be writable)"})
	}
	rows = append(rows, pythonRows(f, cfg)...)
	rows = append(rows, shimRow(f, cfg))
	return rows
}

// pythonRows: the bootloader's search, then enrollment's rule on the
// versions the agent's own probe reports.
func pythonRows(f facts, cfg Config) []Check {
	if f.python == "" {
		why := "the bootloader: " + f.noPython
		if f.noPython == "" {
			why = "the probe stopped before the bootloader's search ended"
		}
		if len(f.elsewhere) > 0 {
			why += fmt.Sprintf("; %s imports ray but is not where the bootloader looks: set ENV RAYVAST_PYTHON=%s in the image, or put its dir first on PATH", f.elsewhere[0], f.elsewhere[0])
		} else {
			want := "ray[default]"
			if cfg.RayVersion != "" {
				want += "==" + cfg.RayVersion
			}
			why += "; no Python that imports ray elsewhere either (/usr, /opt, /root, /home looked at): install " + want
		}
		return []Check{{"python", Fail, why}, {"ray", Skip, "no Python that imports ray"}}
	}
	rows := []Check{{"python", OK, f.python + " imports ray (found by the bootloader's own search)"}}
	if !f.versionsSeen {
		return append(rows, Check{"ray", Fail, "the agent's version probe printed no answer with " + f.python})
	}
	if why := rayversion.Problem(f.versions.Ray, f.versions.Python, cfg.RayVersion, cfg.PythonVersion); why != "" {
		return append(rows, Check{"ray", Fail, why + ": the head refuses it at enrollment (ray_version) and destroys the rental"})
	}
	return append(rows, Check{"ray", OK, fmt.Sprintf("ray %s, python %s: %s", f.versions.Ray, f.versions.Python, wants(cfg))})
}

func wants(cfg Config) string {
	r, p := cfg.RayVersion, cfg.PythonVersion
	if r == "" {
		r = "any (at least " + rayversion.Floor + ")"
	}
	if p == "" {
		p = "any"
	}
	return "the config wants ray " + r + ", python " + p
}

// shimRow: the native layer of the shim the head sends (docs/protocol.md §9) does
// Ray's C/C++ binds and connects behind vast's NAT; where it cannot load,
// those depend on hairpin NAT.
func shimRow(f facts, cfg Config) Check {
	const off = ": Ray's C/C++ binds and connects to the node IP would then rely on the host's hairpin NAT; use a glibc image of this machine's architecture"
	switch {
	case cfg.Shim == nil:
		return Check{"shim", Skip, "the head sends no shim (--shim none)"}
	case !cfg.ShimNative:
		return Check{"shim", Skip, "this head's shim carries no native library (built with go build, not ./build.sh)"}
	case f.loader == "":
		return Check{"shim", Fail, "no glibc loader (ld-linux*.so) in the image (musl or static): the shim's native library cannot load" + off}
	case f.python == "":
		return Check{"shim", Skip, "glibc's loader is " + f.loader + "; not loaded: no Python that imports ray"}
	case strings.HasPrefix(f.shim, "ok "):
		return Check{"shim", OK, "the native library loads (written to " + strings.TrimPrefix(f.shim, "ok ") + " as in `ray start`)"}
	case strings.HasPrefix(f.shim, "fail "):
		return Check{"shim", Fail, "native layer off: " + strings.TrimPrefix(f.shim, "fail ") + off}
	}
	return Check{"shim", Fail, "the shim's check printed no answer"}
}
