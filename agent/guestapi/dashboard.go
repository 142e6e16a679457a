package guestapi

import (
	"bytes"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/wire"
)

// dashboardPage is the data of one rendering. A nil block is not rendered,
// and its data was never computed: an anonymous visitor granted only
// guest:dashboard costs the node no Info.
type dashboardPage struct {
	AppID     string
	Identity  *wire.GuestInfo
	Processes *[]Process
	Logs      *[]string
	Sysinfo   *sysinfo
}

func (s *Server) serveDashboard(w http.ResponseWriter, granted guestauth.Scopes) {
	p := dashboardPage{AppID: s.cfg.AppID}
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
// cost the agent over a megabyte, and this page has six fields to escape.
func renderDashboard(p dashboardPage) []byte {
	var b bytes.Buffer
	e := html.EscapeString
	row := func(th, td string) { fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>\n", th, td) }
	code := func(s string) string { return "<code>" + e(s) + "</code>" }
	fmt.Fprintf(&b, `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rayvast node %s</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:60em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
section{margin-bottom:1.5em}
</style>
</head>
<body>
<h1>rayvast node</h1>
<p>App %s</p>
`, e(p.AppID), code(p.AppID))
	if in := p.Identity; in != nil {
		b.WriteString("<section id=\"identity\">\n<h2>Identity</h2>\n<table>\n")
		row("app id", code(in.AppID))
		row("instance id", code(in.InstanceID))
		row("app public key", code(in.AppPublicKey))
		row("public_logs", strconv.FormatBool(in.PublicLogs))
		row("public_sysinfo", strconv.FormatBool(in.PublicSysinfo))
		row("public_tcbinfo", strconv.FormatBool(in.PublicTCBInfo))
		if tcb := in.TCB; tcb != nil {
			row("agent sha256", code(tcb.AgentSHA256))
			if c := tcb.Checks; c != nil {
				row("host checks", fmt.Sprintf("capabilities %t, netns %t, shm %t, egress %t; gpus %d",
					c.Checks.Capabilities.OK, c.Checks.Netns.OK, c.Checks.Shm.OK, c.Checks.Egress.OK, c.GPUs))
			}
		}
		b.WriteString("</table>\n</section>\n")
	}
	if p.Processes != nil {
		b.WriteString("<section id=\"processes\">\n<h2>Processes</h2>\n<table>\n")
		b.WriteString("<tr><th>name</th><th>pid</th><th>state</th><th>restarts</th></tr>\n")
		for _, pr := range *p.Processes {
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%d</td><td>%s</td><td>%d</td></tr>\n", e(pr.Name), pr.PID, e(pr.State), pr.Restarts)
		}
		b.WriteString("</table>\n</section>\n")
	}
	if p.Logs != nil {
		b.WriteString("<section id=\"logs\">\n<h2>Logs</h2>\n<ul>")
		for _, n := range *p.Logs {
			fmt.Fprintf(&b, `<li><a href="/logs/%s">%s</a></li>`, e(url.PathEscape(n)), e(n))
		}
		b.WriteString("</ul>\n</section>\n")
	}
	if si := p.Sysinfo; si != nil {
		b.WriteString("<section id=\"sysinfo\">\n<h2>System</h2>\n<table>\n")
		row("uptime (s)", fmt.Sprintf("%.0f", si.UptimeSeconds))
		row("load", fmt.Sprintf("%v %v %v", si.Load1, si.Load5, si.Load15))
		row("memory", fmt.Sprintf("%d of %d bytes available", si.MemAvailBytes, si.MemTotalBytes))
		row("processes", strconv.Itoa(si.Processes))
		b.WriteString("</table>\n</section>\n")
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}
