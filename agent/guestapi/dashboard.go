package guestapi

import (
	"bytes"
	"html/template"
	"net/http"
	"sort"

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
	var buf bytes.Buffer
	if err := dashboardTmpl.Execute(&buf, p); err != nil {
		s.cfg.Log.Error("render dashboard failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// The page is plain HTML: no script, no framework, each block a <section>
// with a stable id that tests look for.
var dashboardTmpl = template.Must(template.New("dashboard").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rayvast node {{.AppID}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:60em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}
section{margin-bottom:1.5em}
</style>
</head>
<body>
<h1>rayvast node</h1>
<p>App <code>{{.AppID}}</code></p>
{{with .Identity}}<section id="identity">
<h2>Identity</h2>
<table>
<tr><th>app id</th><td><code>{{.AppID}}</code></td></tr>
<tr><th>instance id</th><td><code>{{.InstanceID}}</code></td></tr>
<tr><th>app public key</th><td><code>{{.AppPublicKey}}</code></td></tr>
<tr><th>public_logs</th><td>{{.PublicLogs}}</td></tr>
<tr><th>public_sysinfo</th><td>{{.PublicSysinfo}}</td></tr>
<tr><th>public_tcbinfo</th><td>{{.PublicTCBInfo}}</td></tr>
{{with .TCB}}<tr><th>agent sha256</th><td><code>{{.AgentSHA256}}</code></td></tr>
{{with .Checks}}<tr><th>host checks</th><td>capabilities {{.Checks.Capabilities.OK}}, netns {{.Checks.Netns.OK}}, shm {{.Checks.Shm.OK}}, egress {{.Checks.Egress.OK}}; gpus {{.GPUs}}</td></tr>
{{end}}{{end}}</table>
</section>
{{end}}{{with .Processes}}<section id="processes">
<h2>Processes</h2>
<table>
<tr><th>name</th><th>pid</th><th>state</th><th>restarts</th></tr>
{{range .}}<tr><td>{{.Name}}</td><td>{{.PID}}</td><td>{{.State}}</td><td>{{.Restarts}}</td></tr>
{{end}}</table>
</section>
{{end}}{{with .Logs}}<section id="logs">
<h2>Logs</h2>
<ul>{{range .}}<li><a href="/logs/{{.}}">{{.}}</a></li>{{end}}</ul>
</section>
{{end}}{{with .Sysinfo}}<section id="sysinfo">
<h2>System</h2>
<table>
<tr><th>uptime (s)</th><td>{{printf "%.0f" .UptimeSeconds}}</td></tr>
<tr><th>load</th><td>{{.Load1}} {{.Load5}} {{.Load15}}</td></tr>
<tr><th>memory</th><td>{{.MemAvailBytes}} of {{.MemTotalBytes}} bytes available</td></tr>
<tr><th>processes</th><td>{{.Processes}}</td></tr>
</table>
</section>
{{end}}</body>
</html>
`))
