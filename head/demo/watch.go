package demo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/provider/docker"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/wire"
)

// watch redraws the live table until every candidate has an outcome, the
// timeout passes, or ctx ends.
func (d *demo) watch(ctx context.Context, admin *adminclient.Client, unsafe map[string]bool) ([]row, error) {
	tty := isTTY(d.out)
	width := termWidth(d.out)
	deadline := time.Now().Add(d.o.timeout)
	drawn := 0
	last := map[string]string{}
	var rows []row
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		cands, err := admin.Candidates(ctx)
		if err != nil && ctx.Err() == nil {
			return rows, err
		}
		nodes, _ := admin.Nodes(ctx)
		rows = buildRows(ours(cands, unsafe), nodes, d.containers(ctx), unsafe, d.now(), time.Duration(d.o.interval)*time.Second)
		if tty {
			if drawn > 0 {
				fmt.Fprintf(d.out, "\x1b[%dA", drawn)
			}
			var b strings.Builder
			n := renderTable(&b, rows)
			// Each line clipped to the terminal: a wrapped line would
			// break the redraw (it moves up by lines, not rows).
			for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
				fmt.Fprint(d.out, "\x1b[2K"+clipRunes(l, width-1)+"\n")
			}
			drawn = n
		} else {
			// A log or a pipe: one line per change.
			for _, r := range rows {
				key := r.State + "|" + r.Step
				if strings.HasPrefix(r.Step, "Ray running") { // its heartbeat age ticks: not a change
					key = r.State + "|Ray running"
				}
				if last[r.ID] != key {
					last[r.ID] = key
					fmt.Fprintf(d.out, "[%6.1fs] %-18s %-11s %-8s %s\n", r.Elapsed.Seconds(), r.ID, r.typeName(), r.State, r.Step)
				}
			}
		}
		if allDone(rows, len(unsafe)) {
			return rows, nil
		}
		if time.Now().After(deadline) {
			d.say("\n(gave up waiting after %s)", d.o.timeout)
			return rows, nil
		}
		select {
		case <-ctx.Done():
			return rows, nil
		case <-d.serveDone:
			return rows, fmt.Errorf("the head exited")
		case <-tick.C:
		}
	}
}

// ours keeps the candidates this demo asked for.
func ours(cands []wire.Candidate, mine map[string]bool) []wire.Candidate {
	var out []wire.Candidate
	for _, c := range cands {
		if _, ok := mine[c.CandidateID]; ok {
			out = append(out, c)
		}
	}
	return out
}

// containers maps candidate ID to its container's state and last log line.
func (d *demo) containers(ctx context.Context) map[string]container {
	out := map[string]container{}
	cs, err := d.eng.ListContainers(ctx, vastnet.LabelCluster+"="+d.o.cluster)
	if err != nil {
		return out
	}
	for _, c := range cs {
		ctr := container{State: c.State}
		if info, err := d.eng.InspectContainer(ctx, c.ID); err == nil {
			ctr.ExitCode = info.State.ExitCode
		}
		if stdout, stderr, err := d.eng.ContainerLogsTail(ctx, c.ID, 5); err == nil {
			if len(stderr) > 0 {
				ctr.LastLog = summarizeLog(stderr)
			} else if len(stdout) > 0 {
				ctr.LastLog = summarizeLog(stdout)
			}
		}
		out[c.Labels[docker.LabelCandidate]] = ctr
	}
	return out
}

// summary prints the final table and the blocklist; it reports whether the
// demo went as designed (safe candidates are nodes, the unsafe one refused).
func (d *demo) summary(ctx context.Context, admin *adminclient.Client, rows []row) bool {
	d.say("\nSummary (TIME: from request to enrollment, or to the refusal)")
	fmt.Fprintf(d.out, tableFormat+"%s\n", "CANDIDATE", "TYPE", "IP", "STATE", "TIME", "RESULT")
	ok := len(rows) == 3
	for _, r := range rows {
		result := r.Step
		good := r.Node
		if r.Unsafe {
			good = r.State == wire.StateEnded || r.State == wire.StateDestroyRequested
			if good && d.containerGone(ctx, r.ID) {
				result += ", container removed"
			} else if good {
				result += ", container NOT removed"
				good = false
			}
			result += " (it kept NET_RAW)"
		}
		ok = ok && good
		mark := "ok"
		if !good {
			mark = "UNEXPECTED"
		}
		fmt.Fprintf(d.out, tableFormat+"%s [%s]\n", clip(r.ID, 18), r.typeName(), r.IP, r.State, seconds(r.Elapsed), result, mark)
	}
	d.say("(* keeps NET_RAW. Containers are named rv-%s-<candidate>: try docker logs on one.)", d.o.cluster)
	for _, r := range rows {
		if !r.Done || (!r.Node && !r.Unsafe) {
			d.showLogs(ctx, r.ID)
		}
	}
	if bl, err := admin.Blocklist(ctx); err == nil && len(bl) > 0 {
		d.say("\nBlocklist (host ID = container name: all demo containers share this machine)")
		for _, b := range bl {
			d.say("  %s  %s until %s: %s", inert(b.HostID), inert(b.Class), b.Until.Format(time.RFC3339), inert(b.Reason))
		}
	}
	if ok {
		ray := "the stand-in Ray"
		if d.python != "" {
			ray = "real Ray " + d.rayVersion
		}
		d.say("\nEnrolled as designed: 2 nodes run %s; the unsafe candidate was refused and its container removed.", ray)
	} else {
		d.say("\nNot as designed: see the rows marked UNEXPECTED and the head log %s", d.logFile.Name())
	}
	return ok
}

// showLogs prints the end of a candidate's container log (public on vast
// too: it holds no secret).
func (d *demo) showLogs(ctx context.Context, candidateID string) {
	cs, err := d.eng.ListContainers(ctx, vastnet.LabelCluster+"="+d.o.cluster, docker.LabelCandidate+"="+candidateID)
	if err != nil || len(cs) == 0 {
		return
	}
	stdout, stderr, err := d.eng.ContainerLogsTail(ctx, cs[0].ID, 8)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(string(stdout)+string(stderr)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	d.say("\nlast log lines of %s (%s):", inert(candidateID), inert(cs[0].Status))
	for _, l := range lines {
		d.say("  %s", clip(inert(l), 300))
	}
}

// containerGone waits a little for the head to have removed a candidate's
// container (it destroys right after refusing).
func (d *demo) containerGone(ctx context.Context, candidateID string) bool {
	for i := 0; i < 40; i++ {
		if _, ok := d.containers(ctx)[candidateID]; !ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
	return false
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if n < 10 || len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// termWidth is the terminal's width in columns (120 when unknown).
func termWidth(w any) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	return 120
}

func isTTY(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
