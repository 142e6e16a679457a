package hostcheck

import (
	"fmt"
	"os"
	"strings"

	"github.com/syndtr/gocapability/capability"

	"github.com/rayvast/rayvast/internal/wire"
)

// checkCapabilities passes when NET_RAW and NET_ADMIN are in none of the
// effective, permitted and bounding sets. Two sources: ROOT/proc/self/status
// (always) and, when checking the live process, capget(2) through
// gocapability. A capability held per either source fails: a source that
// cannot be read is not evidence of absence, so with no source at all the
// check fails too.
func checkCapabilities(cfg Config) wire.Check {
	file, fileErr := readCapStatus(cfg.path("/proc/self/status"))
	var live func() (capSets, error)
	if cfg.live() {
		live = loadLiveCaps
	}
	return judgeCaps(file, fileErr, live)
}

// judgeCaps combines the status file's sets (or why it could not be read)
// with the live loader (nil when not checking the live process).
func judgeCaps(file capSets, fileErr error, live func() (capSets, error)) wire.Check {
	var sources, held, notes []string
	if fileErr != nil {
		notes = append(notes, fileErr.Error())
	} else {
		sources = append(sources, "status")
		held = append(held, file.held()...)
	}
	if live != nil {
		liveSets, err := live()
		if err != nil {
			notes = append(notes, err.Error())
		} else {
			sources = append(sources, "capget")
			if fileErr == nil && file.net() != liveSets.net() {
				notes = append(notes, "status and capget disagree")
			}
			held = append(held, liveSets.held()...)
		}
	}
	held = dedupe(held)
	switch {
	case len(sources) == 0:
		return fail("cannot read capabilities: " + strings.Join(notes, "; "))
	case len(held) > 0:
		return fail(strings.Join(held, "; ") + withNotes(notes))
	default:
		return pass("NET_RAW and NET_ADMIN absent from effective, permitted and bounding sets (" +
			strings.Join(sources, "+") + ")" + withNotes(notes))
	}
}

func readCapStatus(path string) (capSets, error) {
	f, err := os.Open(path)
	if err != nil {
		return capSets{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	c, err := parseCapStatus(f)
	if err != nil {
		return capSets{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// loadLiveCaps asks the kernel (capget) for this process's capabilities.
// gocapability reads the bounding set from the real /proc/self/status.
func loadLiveCaps() (capSets, error) {
	c, err := capability.NewPid2(0)
	if err != nil {
		return capSets{}, fmt.Errorf("capget: %w", err)
	}
	if err := c.Load(); err != nil {
		return capSets{}, fmt.Errorf("capget: %w", err)
	}
	var s capSets
	for _, cp := range []struct {
		c   capability.Cap
		bit uint
	}{{capability.CAP_NET_RAW, capNetRaw}, {capability.CAP_NET_ADMIN, capNetAdmin}} {
		for _, set := range []struct {
			which capability.CapType
			dst   *uint64
		}{{capability.EFFECTIVE, &s.Effective}, {capability.PERMITTED, &s.Permitted}, {capability.BOUNDING, &s.Bounding}} {
			if c.Get(set.which, cp.c) {
				*set.dst |= 1 << cp.bit
			}
		}
	}
	return s, nil
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func withNotes(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return " (note: " + strings.Join(notes, "; ") + ")"
}
