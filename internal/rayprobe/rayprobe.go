// Package rayprobe is the one Python snippet that asks an image's Python
// for its Ray and Python versions, and the reader of its answer. The agent
// runs it before enrolling (docs/protocol.md §5); `head image-check` runs the same
// snippet inside a local container of the image, so both see one answer.
package rayprobe

import (
	"regexp"
	"strings"
)

// Marker starts the answer line.
const Marker = "RAYVAST-VERSIONS"

// Script prints Python's version even when Ray does not import, on one
// marked line: an image's sitecustomize or Ray's import may print to
// stdout too. Why ray did not import goes to stderr.
const Script = `import platform, sys
p = platform.python_version()
try:
    import ray
    r = str(ray.__version__)
except BaseException as e:
    r = ""
    sys.stderr.write("import ray: %s: %s\n" % (type(e).__name__, e))
sys.stdout.write("\n` + Marker + ` %s %s\n" % (r or "-", p))
`

// Versions is what the Python reports; "" = unknown.
type Versions struct {
	Ray, Python string
}

// versionRe is what a version may look like on the wire (PEP 440 and
// local parts); anything else is reported as unknown.
var versionRe = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)

// Parse reads the last marked line of the script's stdout; false when
// there is none (or it is malformed).
func Parse(stdout string) (Versions, bool) {
	lines := strings.Split(stdout, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		rest, found := strings.CutPrefix(strings.TrimRight(lines[i], "\r"), Marker+" ")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 {
			return Versions{}, false
		}
		var v Versions
		if versionRe.MatchString(f[0]) {
			v.Ray = f[0]
		}
		if versionRe.MatchString(f[1]) {
			v.Python = f[1]
		}
		return v, true
	}
	return Versions{}, false
}
