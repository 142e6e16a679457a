// Package upprogress prints head up's progress: its steps as they happen,
// then one line per change of a rental's state and a summary line
// (rewritten in place on a terminal), from the running head's Go methods.
package upprogress

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/server"
	"github.com/rayvast/rayvast/internal/wire"
)

// Printer prints head up's steps, then follows the candidates.
type Printer struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	live bool   // a summary line is on screen without its newline
	last string // the last summary printed
}

// New prints to w (in place on a terminal).
func New(w io.Writer) *Printer {
	p := &Printer{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// Step prints one line, above the summary line if one is showing.
func (p *Printer) Step(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLive()
	fmt.Fprintf(p.w, "· "+format+"\n", a...)
}

// Plain clears the summary line and returns the writer, for another's
// output (head down's report) on lines of its own.
func (p *Printer) Plain() io.Writer {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLive()
	return p.w
}

func (p *Printer) clearLive() {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
		p.live = false
	}
}

// End finishes the summary line so later output starts on a line of its own.
func (p *Printer) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		fmt.Fprintln(p.w)
		p.live = false
	}
}

func (p *Printer) summary(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == p.last && !p.tty {
		return
	}
	p.last = s
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K"+s)
		p.live = true
		return
	}
	fmt.Fprintln(p.w, s)
}

// Watch follows the running head's candidates every 2 s, through its Go
// methods (never its own admin socket), until ctx ends or the head stops.
func (p *Printer) Watch(ctx context.Context, srv *server.Server, stateDir string) {
	seen := map[string]string{} // candidate → last state shown
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		cands, nodes := srv.Candidates(), srv.Nodes()
		for _, line := range changes(seen, cands) {
			p.Step("%s", line)
		}
		ray, _, _ := rayhead.ReadStatus(stateDir)
		p.summary(summaryLine(cands, nodes, ray))
		select {
		case <-ctx.Done():
			return
		case <-srv.Done():
			return
		case <-tick.C:
		}
	}
}

// changes lists the candidates whose state moved since seen, and updates seen.
func changes(seen map[string]string, cands []wire.Candidate) []string {
	var out []string
	for _, c := range cands {
		if seen[c.CandidateID] == c.State {
			continue
		}
		seen[c.CandidateID] = c.State
		line := fmt.Sprintf("rental %s (%s): %s", c.CandidateID, c.NodeType, c.State)
		var extra []string
		if c.InstanceID != "" {
			extra = append(extra, "instance "+c.InstanceID)
		}
		if c.DPHTotal > 0 {
			extra = append(extra, fmt.Sprintf("$%.3f/h", c.DPHTotal))
		}
		if c.PublicIP != "" {
			extra = append(extra, "ip "+c.PublicIP)
		}
		if c.Reason != "" {
			extra = append(extra, "reason "+c.Reason)
		}
		if len(extra) > 0 {
			line += " (" + strings.Join(extra, ", ") + ")"
		}
		out = append(out, line)
	}
	return out
}

// summaryLine counts candidates by state and healthy nodes.
func summaryLine(cands []wire.Candidate, nodes []wire.Node, ray rayhead.Status) string {
	by := map[string]int{}
	dph := 0.0 // what the live rentals cost, where the provider says
	for _, c := range cands {
		by[c.State]++
		if c.State != wire.StateEnded {
			dph += c.DPHTotal
		}
	}
	healthy := 0
	for _, n := range nodes {
		if n.Ray.State == "running" {
			healthy++
		}
	}
	states := make([]string, 0, len(by))
	for s := range by {
		states = append(states, s)
	}
	sort.Strings(states)
	parts := make([]string, 0, len(states))
	for _, s := range states {
		parts = append(parts, fmt.Sprintf("%d %s", by[s], s))
	}
	rentals := "none yet"
	if len(parts) > 0 {
		rentals = strings.Join(parts, ", ")
	}
	rh := "-"
	if ray.State != "" {
		rh = ray.State
		if ray.Restarts > 0 {
			rh += fmt.Sprintf(" (%d restarts)", ray.Restarts)
		}
	}
	line := fmt.Sprintf("rentals: %s · nodes: %d (%d with Ray running) · Ray head: %s", rentals, len(nodes), healthy, rh)
	if dph > 0 {
		line += fmt.Sprintf(" · $%.3f/h", dph)
	}
	return line
}
