package hostcheck

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Capability bit numbers from linux/capability.h.
const (
	capNetAdmin = 12
	capNetRaw   = 13
)

// capSets are the capability masks of one process, bit n = capability n.
type capSets struct {
	Effective, Permitted, Bounding uint64
}

// parseCapStatus reads the CapEff, CapPrm and CapBnd hex masks of a
// /proc/<pid>/status file. All three must be present and well formed: a
// status without them is not a Linux process status we can judge.
func parseCapStatus(r io.Reader) (capSets, error) {
	var c capSets
	fields := map[string]*uint64{"CapEff": &c.Effective, "CapPrm": &c.Permitted, "CapBnd": &c.Bounding}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		dst, want := fields[key]
		if !ok || !want {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64)
		if err != nil {
			return capSets{}, fmt.Errorf("parse %s: bad mask %q", key, strings.TrimSpace(val))
		}
		*dst = v
		seen[key] = true
	}
	if err := sc.Err(); err != nil {
		return capSets{}, fmt.Errorf("read status: %w", err)
	}
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
		if !seen[k] {
			return capSets{}, fmt.Errorf("parse status: no %s line", k)
		}
	}
	return c, nil
}

// net keeps only the NET_RAW and NET_ADMIN bits of each set.
func (c capSets) net() capSets {
	const m = 1<<capNetRaw | 1<<capNetAdmin
	return capSets{c.Effective & m, c.Permitted & m, c.Bounding & m}
}

// held lists "NET_RAW in effective" style findings for the two network
// capabilities, empty when neither is in any of the three sets.
func (c capSets) held() []string {
	var out []string
	for _, cp := range []struct {
		name string
		bit  uint
	}{{"NET_RAW", capNetRaw}, {"NET_ADMIN", capNetAdmin}} {
		var in []string
		for _, set := range []struct {
			name string
			mask uint64
		}{{"effective", c.Effective}, {"permitted", c.Permitted}, {"bounding", c.Bounding}} {
			if set.mask&(1<<cp.bit) != 0 {
				in = append(in, set.name)
			}
		}
		if len(in) > 0 {
			out = append(out, cp.name+" in "+strings.Join(in, ","))
		}
	}
	return out
}
