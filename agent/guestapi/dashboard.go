package guestapi

import (
	"bytes"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/wire"
)

// dashboardPage is the data of one rendering. A nil block is not rendered,
// and its data was never computed: an anonymous visitor granted only
// guest:dashboard costs the node no Info. Nothing outside the blocks names
// the app or the node (docs/protocol.md §9): not the title, not a heading.
type dashboardPage struct {
	Identity  *wire.GuestInfo
	Processes *[]Process
	Logs      *[]string
	Sysinfo   *sysinfo
	GPUs      *[]gpu
}

func (s *Server) serveDashboard(w http.ResponseWriter, granted guestauth.Scopes) {
	var p dashboardPage
	if guestauth.Visible(guestauth.BlockIdentity, granted, s.switches) {
		in := s.info()
		p.Identity = &in
	}
	if guestauth.Visible(guestauth.BlockProcesses, granted, s.switches) {
		var procs []Process
		if s.cfg.Processes != nil {
			procs = s.cfg.Processes()
		}
		p.Processes = &procs
	}
	if guestauth.Visible(guestauth.BlockLogs, granted, s.switches) {
		names := make([]string, 0, len(s.logs))
		for n := range s.logs {
			names = append(names, n)
		}
		sort.Strings(names)
		p.Logs = &names
	}
	if guestauth.Visible(guestauth.BlockSysinfo, granted, s.switches) {
		si := s.sysinfo()
		p.Sysinfo = &si
	}
	if guestauth.Visible(guestauth.BlockGPUs, granted, s.switches) {
		g := s.gpus.read()
		p.GPUs = &g
	}
	page := renderDashboard(p)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(page)
}

// The page is plain HTML: no script, no framework, each block a <section>
// with a stable id that tests look for. It is written by hand rather than
// with html/template: templates keep every method reachable by reflection and
// cost the agent over a megabyte, and this page has few fields to escape.
func renderDashboard(p dashboardPage) []byte {
	var b bytes.Buffer
	b.WriteString(pageHead)
	if p.Identity == nil && p.Processes == nil && p.Logs == nil && p.Sysinfo == nil && p.GPUs == nil {
		b.WriteString("<p class=\"none\">Nothing to show: this visitor is granted no block of this page.</p>\n")
	}
	if in := p.Identity; in != nil {
		renderIdentity(&b, in)
	}
	if p.Processes != nil {
		renderProcesses(&b, *p.Processes)
	}
	if p.Logs != nil {
		renderLogs(&b, *p.Logs)
	}
	if si := p.Sysinfo; si != nil {
		renderSysinfo(&b, si)
	}
	if p.GPUs != nil {
		renderGPUs(&b, *p.GPUs)
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}

const pageHead = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rayvast node</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:60em;color:#222}
h1{font-size:1.4em}h2{font-size:1.1em;margin:.2em 0 .5em}
section{margin-bottom:1.2em;padding:.6em 1em;border:1px solid #ddd;border-radius:6px}
table{border-collapse:collapse}td,th{padding:.2em .8em .2em 0;text-align:left;vertical-align:top}
th{font-weight:600;color:#555}code{font-size:.9em;word-break:break-all}
.none{color:#888}.ok{color:#176f2c}.bad{color:#a4161a}
</style>
</head>
<body>
<h1>rayvast node</h1>
`

var esc = html.EscapeString

func code(s string) string { return "<code>" + esc(s) + "</code>" }

// none is a placeholder for what this node has no value of.
func none(why string) string { return `<span class="none">` + esc(why) + "</span>" }

func row(b *bytes.Buffer, th, td string) { fmt.Fprintf(b, "<tr><th>%s</th><td>%s</td></tr>\n", th, td) }

func section(b *bytes.Buffer, id, title string) {
	fmt.Fprintf(b, "<section id=\"%s\">\n<h2>%s</h2>\n", id, title)
}

func renderIdentity(b *bytes.Buffer, in *wire.GuestInfo) {
	section(b, "identity", "Identity")
	b.WriteString("<table>\n")
	row(b, "app id", code(in.AppID))
	if in.InstanceID == "" {
		row(b, "instance id", none("— (standalone: no node identity)"))
	} else {
		row(b, "instance id", code(in.InstanceID))
	}
	row(b, "app public key", code(in.AppPublicKey))
	row(b, "switches", fmt.Sprintf("public_logs %s · public_sysinfo %s · public_tcbinfo %s",
		onOff(in.PublicLogs), onOff(in.PublicSysinfo), onOff(in.PublicTCBInfo)))
	switch tcb := in.TCB; {
	case tcb == nil:
		row(b, "host", none("— (public_tcbinfo off)"))
	default:
		row(b, "agent sha256", code(tcb.AgentSHA256))
		if c := tcb.Checks; c != nil {
			var parts []string
			for _, ch := range c.Checks.List() {
				parts = append(parts, ch.Name+" "+pass(ch.OK))
			}
			row(b, "host checks", fmt.Sprintf("%s · GPUs %d", strings.Join(parts, " · "), c.GPUs))
		} else {
			row(b, "host checks", none("— (not run: standalone)"))
		}
	}
	b.WriteString("</table>\n</section>\n")
}

func onOff(v bool) string {
	if v {
		return "on"
	}
	return "off"
}

func pass(ok bool) string {
	if ok {
		return `<span class="ok">ok</span>`
	}
	return `<span class="bad">failed</span>`
}

func renderProcesses(b *bytes.Buffer, procs []Process) {
	section(b, "processes", "Processes")
	if len(procs) == 0 {
		b.WriteString(none("No supervised process (standalone: the agent runs no Ray).") + "\n</section>\n")
		return
	}
	b.WriteString("<table>\n<tr><th>name</th><th>pid</th><th>state</th><th>restarts</th></tr>\n")
	for _, pr := range procs {
		pid := strconv.Itoa(pr.PID)
		if pr.PID == 0 {
			pid = none("—")
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%d</td></tr>\n", esc(pr.Name), pid, esc(pr.State), pr.Restarts)
	}
	b.WriteString("</table>\n</section>\n")
}

func renderLogs(b *bytes.Buffer, names []string) {
	section(b, "logs", "Logs")
	if len(names) == 0 {
		b.WriteString(none("No log is mounted.") + "\n</section>\n")
		return
	}
	b.WriteString("<ul>")
	for _, n := range names {
		fmt.Fprintf(b, `<li><a href="/logs/%s">%s</a></li>`, esc(url.PathEscape(n)), esc(n))
	}
	b.WriteString("</ul>\n</section>\n")
}

func renderSysinfo(b *bytes.Buffer, si *sysinfo) {
	section(b, "sysinfo", "System")
	b.WriteString("<table>\n")
	row(b, "agent up", esc(humanDuration(time.Duration(si.UptimeSeconds*float64(time.Second)))))
	row(b, "load", fmt.Sprintf("%.2f · %.2f · %.2f (1, 5, 15 min)", si.Load1, si.Load5, si.Load15))
	if si.MemTotalBytes > 0 {
		row(b, "memory", esc(fmt.Sprintf("%s available of %s", humanBytes(si.MemAvailBytes), humanBytes(si.MemTotalBytes))))
	} else {
		row(b, "memory", none("— (no /proc/meminfo)"))
	}
	row(b, "supervised processes", strconv.Itoa(si.Processes))
	row(b, "agent", esc(fmt.Sprintf("%d goroutines, %s heap", si.Goroutines, humanBytes(int64(si.AgentHeapBytes)))))
	b.WriteString("</table>\n</section>\n")
}

func renderGPUs(b *bytes.Buffer, gpus []gpu) {
	section(b, "gpus", "GPUs")
	if len(gpus) == 0 {
		b.WriteString(none("No NVIDIA GPU visible (no /proc/driver/nvidia/gpus).") + "\n</section>\n")
		return
	}
	b.WriteString("<table>\n<tr><th>bus</th><th>model</th><th>memory</th><th>utilisation</th><th>temperature</th></tr>\n")
	noSMI := none("—")
	for _, g := range gpus {
		mem, util, temp := noSMI, noSMI, noSMI
		if g.MemTotalMiB >= 0 {
			mem = esc(humanBytes(g.MemTotalMiB << 20))
			if g.MemUsedMiB >= 0 {
				mem = esc(fmt.Sprintf("%s used of %s", humanBytes(g.MemUsedMiB<<20), humanBytes(g.MemTotalMiB<<20)))
			}
		}
		if g.UtilPct >= 0 {
			util = fmt.Sprintf("%d %%", g.UtilPct)
		}
		if g.TempC >= 0 {
			temp = fmt.Sprintf("%d °C", g.TempC)
		}
		model := code(g.Model)
		if g.Model == "" {
			model = none("—")
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", code(g.Bus), model, mem, util, temp)
	}
	b.WriteString("</table>\n")
	if gpus[0].MemTotalMiB < 0 {
		b.WriteString("<p>" + none("Memory, utilisation and temperature need nvidia-smi, which this image lacks.") + "</p>\n")
	}
	b.WriteString("</section>\n")
}

// humanBytes is n in B, KiB, MiB, GiB or TiB, one decimal above KiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(n)/unit, 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// humanDuration is d as "3d 4h", "2h 5m", "4m 10s" or "12s".
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	days, h, m, sec := int(d/(24*time.Hour)), int(d/time.Hour)%24, int(d/time.Minute)%60, int(d/time.Second)%60
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, h)
	case h > 0:
		return fmt.Sprintf("%dh %dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, sec)
	}
	return fmt.Sprintf("%ds", sec)
}
