// Package imagecheck is `head image-check`: it runs an image on this
// machine's Docker the way a vast rental starts it (`/bin/sh -c` in place
// of the image's entrypoint, NET_RAW and NET_ADMIN dropped), with a probe
// in place of the bootloader's download, and says what the head would
// refuse and why, before any money is spent. It never pulls, never
// contacts vast (the container has no network), and removes its
// container whatever happens.
package imagecheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rayvast/rayvast/internal/dockerengine"
)

// Verdicts of a check.
const (
	OK   = "ok"
	Fail = "FAIL"
	Skip = "skip" // not judged: an earlier check failed, or nothing to judge
)

// Config is what an image is checked against.
type Config struct {
	Engine *dockerengine.Client
	Image  string
	// RayVersion and PythonVersion are the config's ray.version and
	// ray.python_version ("" = any), judged by enrollment's rule.
	RayVersion, PythonVersion string
	// CUDAFilters is, per GPU node type, the cuda_max_good its offers are
	// searched with when it rents Image (vast.NodeFilters).
	CUDAFilters map[string]float64
	// Shim is the sitecustomize.py the head sends; nil when it sends none.
	// ShimNative says it carries native libraries (build.sh built them).
	Shim       []byte
	ShimNative bool
	// Timeout bounds the container's run (default 2 minutes: a cold
	// `import ray` from a slow disk takes seconds, not minutes).
	Timeout time.Duration
}

// Label marks the check's containers (a test finds leftovers by it).
const Label = "rayvast.image-check"

// Check is one row of the table.
type Check struct {
	Name, Verdict, Detail string
}

// Result is every check, in the table's order.
type Result struct {
	Image  string
	Checks []Check
	Took   time.Duration
}

// OK reports whether a rental of the image would enroll and run Ray: no
// check failed.
func (r Result) OK() bool {
	for _, c := range r.Checks {
		if c.Verdict == Fail {
			return false
		}
	}
	return true
}

// Get returns the check named name (zero Check when absent).
func (r Result) Get(name string) Check {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return Check{}
}

// Print writes the table and the verdict.
func (r Result) Print(w io.Writer) {
	fmt.Fprintf(w, "image %s\n\n", r.Image)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tVERDICT\tDETAIL")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Verdict, c.Detail)
	}
	tw.Flush()
	if r.OK() {
		fmt.Fprintf(w, "\nverdict: a rental of this image would enroll and run Ray (checked in %v)\n", r.Took.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "\nverdict: a rental of this image would not run Ray; fix the FAIL rows (checked in %v)\n", r.Took.Round(time.Millisecond))
	}
}

// ErrNotLocal says the image is not on this machine's Docker.
var ErrNotLocal = errors.New("not on this machine's Docker")

// Run checks cfg.Image. An error is about the check itself (Docker
// unreachable, the image not local); what is wrong with the image is in
// the Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	start := time.Now()
	res := Result{Image: cfg.Image}
	if cfg.Engine == nil {
		cfg.Engine = dockerengine.New("")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	info, err := cfg.Engine.InspectImage(ctx, cfg.Image)
	if errors.Is(err, dockerengine.ErrNotFound) {
		return res, fmt.Errorf("image %s: %w: `docker pull %s` (or build it) first; image-check never pulls", cfg.Image, ErrNotLocal, cfg.Image)
	}
	if err != nil {
		return res, fmt.Errorf("image %s: %w", cfg.Image, err)
	}
	res.Checks = append(res.Checks, imageRow(info), portsRow(info), cudaRow(cfg.Image, info.Config.Env, cfg.CUDAFilters))
	out, err := runProbe(ctx, cfg)
	var noShell *noShellError
	switch {
	case errors.As(err, &noShell):
		res.Checks = append(res.Checks, Check{"sh", Fail, noShell.Error()})
	case err != nil:
		return res, err
	default:
		res.Checks = append(res.Checks, containerRows(parse(out), cfg)...)
	}
	res.Took = time.Since(start)
	return res, nil
}

// noShellError: the container did not start for want of /bin/sh.
type noShellError struct{ err error }

func (e *noShellError) Error() string {
	return "no /bin/sh: a rental runs /bin/sh -c BOOTLOADER (vast's onstart); add a POSIX shell (dash, bash or busybox ash) at /bin/sh"
}

// runProbe runs the probe in a fresh container of the image and returns
// its stdout. The container is removed on every path, with a context of
// its own: a Ctrl-C has cancelled ctx by then.
func runProbe(ctx context.Context, cfg Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	id, err := cfg.Engine.CreateContainer(ctx, "", dockerengine.ContainerConfig{
		Image: cfg.Image,
		// vast's shape (head/provider/vast: onstart "/bin/sh", args
		// ["-c", TEXT]): onstart overrides the image's ENTRYPOINT.
		Entrypoint: []string{"/bin/sh"},
		Cmd:        []string{"-c", Probe()},
		Labels:     map[string]string{Label: "1"},
		HostConfig: dockerengine.HostConfig{
			NetworkMode: "none", // nothing to contact: not vast, not the head
			CapDrop:     []string{"NET_RAW", "NET_ADMIN"},
			IpcMode:     "private",
		},
	})
	if err != nil {
		return "", fmt.Errorf("create a container of %s: %w", cfg.Image, err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		_ = cfg.Engine.RemoveContainer(rctx, id, true)
	}()
	if err := cfg.Engine.PutArchive(ctx, id, "/", bytes.NewReader(files(cfg.Shim))); err != nil {
		return "", fmt.Errorf("copy the probe into %s: %w", cfg.Image, err)
	}
	if err := cfg.Engine.StartContainer(ctx, id); err != nil {
		if s := err.Error(); strings.Contains(s, "/bin/sh") && (strings.Contains(s, "no such file") || strings.Contains(s, "not found")) {
			return "", &noShellError{err}
		}
		return "", fmt.Errorf("start a container of %s: %w", cfg.Image, err)
	}
	code, err := cfg.Engine.WaitContainer(ctx, id)
	if err != nil {
		return "", fmt.Errorf("wait for the probe in %s: %w", cfg.Image, err)
	}
	stdout, stderr, err := cfg.Engine.ContainerLogs(ctx, id)
	if err != nil {
		return "", fmt.Errorf("read the probe's output: %w", err)
	}
	if !strings.Contains(string(stdout), lineMark+" sh ok") {
		return "", fmt.Errorf("the probe did not run in %s (exit %d): %s", cfg.Image, code, lastLine(string(stderr)))
	}
	return string(stdout), nil
}

// lastLine is the last non-empty line of s, cut short.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := lines[len(lines)-1]
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	if l == "" {
		return "no output"
	}
	return l
}
