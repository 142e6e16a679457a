package main

import (
	"fmt"
	"io"
	"strings"
)

// A comparison is one head/bare figure of a run. Absolute times on shared
// machines differ by 2× from one machine to the next; a ratio measured in
// one run on the same CPUs compares like with like, so the targets are
// ratios.
type comparison struct {
	what       string
	head, bare float64
	unit       string
	target     float64 // the most head/bare may be; 0: no target
}

func (r comparison) value() float64 {
	if r.bare <= 0 {
		return 0
	}
	return r.head / r.bare
}

// String is one line: the two figures, their ratio and the verdict.
func (r comparison) String() string {
	s := fmt.Sprintf("%s: head %s, bare %s: ×%.2f", r.what, figure(r.head, r.unit), figure(r.bare, r.unit), r.value())
	switch {
	case r.target <= 0:
	case r.bare <= 0:
		s += fmt.Sprintf(" (target ≤ ×%.2f: no bare figure)", r.target)
	case r.value() <= r.target:
		s += fmt.Sprintf(" (target ≤ ×%.2f: met)", r.target)
	default:
		s += fmt.Sprintf(" (target ≤ ×%.2f: MISSED)", r.target)
	}
	return s
}

// figure prints v with three significant digits, enough for a ratio's
// two sides and no more than the noise allows.
func figure(v float64, unit string) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}

// report gathers a run's ratios to print them together at the end.
type report struct{ ratios []comparison }

func (rep *report) add(r comparison) comparison {
	rep.ratios = append(rep.ratios, r)
	return r
}

func (rep *report) write(w io.Writer) {
	fmt.Fprintln(w, "\n== head/bare, measured side by side in this run")
	for _, r := range rep.ratios {
		fmt.Fprintln(w, strings.TrimSpace(r.String()))
	}
}

// perEach is a total divided by a count, 0 for none.
func perEach(total float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return total / float64(n)
}
