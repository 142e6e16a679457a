package imagecheck

import (
	"archive/tar"
	"bytes"
	"strings"
	"time"

	rayvast "github.com/rayvast/rayvast"
	"github.com/rayvast/rayvast/internal/rayprobe"
)

// Dir is where the check's files go in the container: beside the agent's
// own state dir (/run/rayvast), so the shim's native library is written
// where a node's would be (Ray's temp dir there), not to /tmp.
const Dir = "/run/rayvast-check"

// lineMark starts each fact the probe prints on stdout.
const lineMark = "RAYVAST-CHECK"

// probeHead runs before the bootloader's own Python search: the shell
// ran (no sh: the container does not start), the commands the bootloader
// uses, whether the dir `mktemp -d` gives (where the bootloader puts the
// agent and execs it) allows exec, and glibc's loader (the shim's native
// library needs it). die replaces the bootloader's: it says why no Python
// was found, then looks for one the bootloader's list misses (only to
// name it in the advice; the verdict is the bootloader's search).
const probeHead = `say() { echo "` + lineMark + ` $*"; }
say sh ok
m=; for t in mktemp chmod rm sleep wc; do command -v $t >/dev/null 2>&1 || m="$m $t"; done
say tools$m
D=$(mktemp -d 2>/dev/null)
if [ -n "$D" ] && printf '#!/bin/sh\nexit 0\n' >"$D/x" && chmod 700 "$D/x" && "$D/x"; then say tmpexec ok "$D"; else say tmpexec fail "${D:-mktemp -d failed}"; fi
[ -n "$D" ] && rm -rf "$D"
L=; for f in /lib64/ld-linux*.so* /lib/ld-linux*.so* /lib/*/ld-linux*.so*; do [ -e "$f" ] && { L=$f; break; }; done
say loader $L
die() {
	say nopython "$*"
	for p in /usr/bin/python3* /usr/local/bin/python3* /opt/*/bin/python3 /opt/*/*/bin/python3 /usr/local/*/bin/python3 \
		/root/*/bin/python3 /root/.*/bin/python3 /home/*/*/bin/python3 /home/*/.*/bin/python3 /usr/lib/*/bin/python3; do
		[ -x "$p" ] && "$p" -c 'import ray' >/dev/null 2>&1 && say elsewhere "$p"
	done
	exit 0
}
`

// probeTail runs with $P, the Python the bootloader found: the agent's own
// version probe (as RAYVAST_PYTHON, as the agent runs it), then the shim.
const probeTail = `say python "$P"
"$P" ` + Dir + `/rayprobe.py
[ -f ` + Dir + `/shimcheck.py ] && "$P" ` + Dir + `/shimcheck.py
say done
`

// Probe is the container's command text: the probe's shell steps around
// the bootloader's Python search.
func Probe() string {
	return probeHead + rayvast.PythonSearch() + probeTail
}

// shimCheck loads the shim the head sends as a module (no NAT_SHIM and no
// `ray start` argv: it changes nothing), lets its own preload() pick and
// write the native library exactly as in `ray start`, then starts a
// Python with that LD_PRELOAD: the loader says whether it loads.
const shimCheck = `import importlib.util, os, subprocess, sys
say = lambda *a: print("` + lineMark + `", *a, flush=True)
spec = importlib.util.spec_from_file_location("rayvast_shim", sys.argv[1] if len(sys.argv) > 1 else "` + Dir + `/shim/sitecustomize.py")
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
try:
    why = m.preload(["--temp-dir=` + Dir + `"])
except OSError as e:
    why = "cannot write it: %s" % e
if why:
    say("shim fail", why)
    sys.exit(0)
lib = os.environ["LD_PRELOAD"].split(":")[0]
r = subprocess.run([sys.executable, "-c", "pass"], stderr=subprocess.PIPE, env=os.environ)
err = r.stderr.decode("utf-8", "replace").strip().splitlines()
bad = [l for l in err if "ld.so" in l or "LD_PRELOAD" in l or "preload" in l]
if r.returncode != 0 or bad:
    say("shim fail", "the loader refused %s: %s" % (lib, (bad or err or ["exit %d" % r.returncode])[-1]))
else:
    say("shim ok", lib)
`

// files is the tar put at / before the container starts: the agent's
// version probe, and, when the head sends a shim, the shim and its check.
func files(shim []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Unix(0, 0)
	dir := func(name string) {
		_ = tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mt})
	}
	file := func(name string, data []byte) {
		_ = tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: mt})
		_, _ = tw.Write(data)
	}
	root := strings.TrimPrefix(Dir, "/")
	dir("run")
	dir(root)
	file(root+"/rayprobe.py", []byte(rayprobe.Script))
	if shim != nil {
		dir(root + "/shim")
		file(root+"/shim/sitecustomize.py", shim)
		file(root+"/shimcheck.py", []byte(shimCheck))
	}
	_ = tw.Close() // a bytes.Buffer does not fail
	return buf.Bytes()
}

// facts is what the probe printed.
type facts struct {
	started      bool     // the shell ran
	missingTools []string // of the bootloader's commands
	tmpExec      bool
	tmpDir       string // the dir mktemp -d gave, or why none
	loader       string // glibc's loader, "" when none
	python       string // the Python the bootloader's search found
	noPython     string // the bootloader's message when it found none
	elsewhere    []string
	versions     rayprobe.Versions
	versionsSeen bool
	shim         string // "ok LIB" or "fail WHY"; "" when not checked
	done         bool   // the probe ran to its end
}

// parse reads the probe's stdout.
func parse(stdout string) facts {
	var f facts
	f.versions, f.versionsSeen = rayprobe.Parse(stdout)
	for _, line := range strings.Split(stdout, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), lineMark+" ")
		if !ok {
			continue
		}
		key, val, _ := strings.Cut(rest, " ")
		switch key {
		case "sh":
			f.started = true
		case "tools":
			f.missingTools = strings.Fields(val)
		case "tmpexec":
			st, dir, _ := strings.Cut(val, " ")
			f.tmpExec, f.tmpDir = st == "ok", dir
		case "loader":
			f.loader = strings.TrimSpace(val)
		case "python":
			f.python = val
		case "nopython":
			f.noPython = val
		case "elsewhere":
			f.elsewhere = append(f.elsewhere, val)
		case "shim":
			f.shim = val
		case "done":
			f.done = true
		}
	}
	return f
}
