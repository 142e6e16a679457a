package hostcheck

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/rayprobe"
)

// DefaultRayProbeTimeout bounds the version probe: a cold `import ray`
// takes seconds on a slow disk, not tens of them.
const DefaultRayProbeTimeout = 30 * time.Second

// RayProbe says which Python to ask and in what environment.
type RayProbe struct {
	Python string   // $RAYVAST_PYTHON
	Env    []string // scrubbed: no secret (raylaunch.Scrubbed)
	// Timeout bounds the subprocess; zero means DefaultRayProbeTimeout.
	Timeout time.Duration
}

// RayVersions is what the found Python reports (docs/protocol.md §5); "" = unknown.
type RayVersions = rayprobe.Versions

const maxProbeOutput = 64 << 10

// ProbeRay asks the found Python for ray.__version__ and
// platform.python_version(), once, in one short subprocess. It returns
// what it learned even with an error (Python found, Ray not importable).
func ProbeRay(ctx context.Context, p RayProbe) (RayVersions, error) {
	if p.Timeout <= 0 {
		p.Timeout = DefaultRayProbeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Python, "-c", rayprobe.Script)
	cmd.Env = p.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would inherit the agent's environment
	}
	var out, errOut capped
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second // a grandchild holding the pipes must not hang us
	runErr := cmd.Run()
	v, ok := rayprobe.Parse(out.String())
	switch {
	case ctx.Err() != nil:
		return v, fmt.Errorf("ray version probe %s: timed out after %v", p.Python, p.Timeout)
	case !ok && runErr != nil:
		return v, fmt.Errorf("ray version probe %s: %w: %s", p.Python, runErr, lastLine(errOut.String()))
	case !ok:
		return v, fmt.Errorf("ray version probe %s: no version line", p.Python)
	case v.Ray == "":
		return v, fmt.Errorf("ray version probe %s: %s", p.Python, lastLine(errOut.String()))
	}
	return v, nil
}

// lastLine is the last non-empty line of s, cut short and made printable
// for a log detail.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := lines[len(lines)-1]
	l = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, l)
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	if l == "" {
		return "no output"
	}
	return l
}

// capped is a bytes.Buffer that keeps only the first maxProbeOutput bytes.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxProbeOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
