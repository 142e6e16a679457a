package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/server"
	"github.com/rayvast/rayvast/head/termtext"
	"github.com/rayvast/rayvast/internal/wire"
)

// progress prints head up's steps as they happen, then follows the
// candidates through the admin socket: one line per change of a rental's
// state, and a summary line (rewritten in place on a terminal).
type progress struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	live bool   // a summary line is on screen without its newline
	last string // the last summary printed
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

// step prints one line, above the summary line if one is showing.
func (p *progress) step(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLive()
	fmt.Fprintf(p.w, "· "+format+"\n", a...)
}

func (p *progress) clearLive() {
	if p.live {
		fmt.Fprint(p.w, "\r\033[K")
		p.live = false
	}
}

// end finishes the summary line so later output starts on a line of its own.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		fmt.Fprintln(p.w)
		p.live = false
	}
}

func (p *progress) summary(s string) {
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

// watch follows the running head's candidates every 2 s, through its Go
// methods (never its own admin socket), until ctx ends or the head stops.
func (p *progress) watch(ctx context.Context, srv *server.Server, stateDir string) {
	seen := map[string]string{} // candidate → last state shown
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		cands, nodes := srv.Candidates(), srv.Nodes()
		for _, line := range changes(seen, cands) {
			p.step("%s", line)
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

// printRayHead is head status's line on the Ray head that head up runs
// (nothing when none ran from this state dir).
func printRayHead(w io.Writer, stateDir string, now time.Time) {
	st, ok, err := rayhead.ReadStatus(stateDir)
	switch {
	case err != nil:
		fmt.Fprintf(w, "\nRAY HEAD: unreadable: %v\n", err)
	case ok:
		fmt.Fprintf(w, "\n%s\n", rayHeadLine(st, now))
		if st.Ports != nil {
			p := st.Ports
			fmt.Fprintf(w, "  ports: GCS %d, dashboard %d (127.0.0.1), Ray Client %d; on loopback only: dashboard agent HTTP %d, metrics export %d, dashboard metrics %d, autoscaler metrics %d\n",
				p.GCS, p.Dashboard, p.RayClient, p.DashboardAgentHTTP, p.MetricsExport, p.DashboardMetrics, p.AutoscalerMetrics)
		}
		if st.LastWords != "" && st.State != rayhead.Running {
			fmt.Fprintf(w, "  failed %d times in a row the same way before it came up; Ray's last words:\n    %s\n",
				st.Failing, strings.ReplaceAll(termtext.Lines(st.LastWords), "\n", "\n    "))
		}
	}
}

func rayHeadLine(st rayhead.Status, now time.Time) string {
	line := fmt.Sprintf("RAY HEAD  %s  %s  for %s  restarts %d", st.Address, st.State, now.Sub(st.Since).Round(time.Second), st.Restarts)
	if st.PID != 0 {
		line += fmt.Sprintf("  pid %d", st.PID)
		if syscall.Kill(st.PID, 0) == syscall.ESRCH {
			// head up died without stopping it (its state file is stale)
			line += " (gone: is head up still running?)"
		}
	}
	if st.LastExit != "" {
		line += "  last exit: " + st.LastExit
	}
	return line + "  log " + st.Log
}
