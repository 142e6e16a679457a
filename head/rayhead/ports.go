package rayhead

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Ports are the Ray head's ports that `head up` chooses rather than
// leaving to Ray: Ray's fixed defaults (dashboard 8265, dashboard agent
// 52365, Ray Client 10001, dashboard metrics 44227, autoscaler metrics
// 44217) would have two clusters on one machine share them, and the
// metrics export port is random unless named. GCS is the config's
// ray.head_address port.
type Ports struct {
	GCS                int `json:"gcs"`
	Dashboard          int `json:"dashboard"`
	DashboardAgentHTTP int `json:"dashboard_agent_http"`
	MetricsExport      int `json:"metrics_export"`
	DashboardMetrics   int `json:"dashboard_metrics"`
	AutoscalerMetrics  int `json:"autoscaler_metrics"`
	RayClient          int `json:"ray_client"`
}

// Loopback are the ports among p that serve without a certificate or, on
// some Ray, without the token: plain-HTTP Prometheus metrics (every Ray)
// and the dashboard agent's HTTP port with its job agent (Ray 2.52 asks no
// token there; a job is a shell command). The Ray head's shim binds them on
// 127.0.0.2 whatever address Ray asks for (NAT_SHIM_LOOPBACK), so they are
// reachable from this machine only, whatever the firewall does.
func (p Ports) Loopback() []int {
	return []int{p.DashboardAgentHTTP, p.MetricsExport, p.DashboardMetrics, p.AutoscalerMetrics}
}

// portChoice is where the search for one port starts and which way it
// goes. Ray's default first; Ray Client counts down, since Ray's worker
// ports start at 10002.
var portChoices = []struct {
	name        string
	start, step int
	field       func(*Ports) *int
}{
	{"dashboard", 8265, 1, func(p *Ports) *int { return &p.Dashboard }},
	{"dashboard agent HTTP", 52365, 1, func(p *Ports) *int { return &p.DashboardAgentHTTP }},
	{"metrics export", 44237, 1, func(p *Ports) *int { return &p.MetricsExport }},
	{"dashboard metrics", 44227, -1, func(p *Ports) *int { return &p.DashboardMetrics }},
	{"autoscaler metrics", 44217, -1, func(p *Ports) *int { return &p.AutoscalerMetrics }},
	{"Ray Client", 10001, -1, func(p *Ports) *int { return &p.RayClient }},
}

// portSearch is how many ports each search tries before it gives up.
const portSearch = 200

// PickPorts chooses the Ray head's ports beside gcs: for each, Ray's
// default when free says so, else the next one that is (none twice, none
// equal to gcs). An error names the port it found none for.
func PickPorts(gcs int, free func(port int) bool) (Ports, error) {
	if free == nil {
		free = PortFree
	}
	p := Ports{GCS: gcs}
	taken := []int{gcs}
	for _, c := range portChoices {
		got := 0
		for i := range portSearch {
			port := c.start + i*c.step
			if port < 1024 || port > 65535 {
				break
			}
			if !slices.Contains(taken, port) && free(port) {
				got = port
				break
			}
		}
		if got == 0 {
			return p, fmt.Errorf("no free port for the Ray head's %s among the %d from %d (other Ray heads on this machine hold them)", c.name, portSearch, c.start)
		}
		*c.field(&p) = got
		taken = append(taken, got)
	}
	return p, nil
}

// PortFree reports whether nothing on this machine listens on TCP port on
// any address: a listener on all addresses (both families) of it opens.
func PortFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// WithPorts is argv with p's ports named: the dashboard (on loopback, Ray's
// default host), the dashboard agent's HTTP, the metrics export and the
// Ray Client server. The dashboard's and the autoscaler's metrics ports
// have no flag; they are in PortsEnv.
func WithPorts(argv []string, p Ports) []string {
	return append(append([]string(nil), argv...),
		"--dashboard-port="+strconv.Itoa(p.Dashboard),
		"--dashboard-agent-listen-port="+strconv.Itoa(p.DashboardAgentHTTP),
		"--metrics-export-port="+strconv.Itoa(p.MetricsExport),
		"--ray-client-server-port="+strconv.Itoa(p.RayClient))
}

// Shim environment: the variables of head/shim/sitecustomize.py. NAT_SHIM
// is "NODE_IP CONTAINER_IP OWN_PORTS"; on the head's machine the node IP is
// local, so both IPs are the head's and no port is rewritten (0) but the
// loopback ones.
const (
	shimEnv         = "NAT_SHIM"
	shimLoopbackEnv = "NAT_SHIM_LOOPBACK"
)

// PortsEnv is env with p's ports that Ray reads from its environment
// (DASHBOARD_METRIC_PORT: ray/dashboard/consts.py; AUTOSCALER_METRIC_PORT:
// ray/autoscaler/_private/constants.py, both Ray 2.52 and 2.60) and the
// shim's loopback rule for headIP (an IPv4 literal) and p.Loopback, with
// shimDir first on PYTHONPATH, so every Python process of the Ray head
// loads the shim.
func PortsEnv(env []string, p Ports, headIP, shimDir string) []string {
	lo := make([]string, 0, 4)
	for _, port := range p.Loopback() {
		lo = append(lo, strconv.Itoa(port))
	}
	env = withVars(env, []string{
		// The Ray Client proxy starts each session's server with a fork
		// whose child runs Python (fate sharing's preexec); gRPC's fork
		// handlers then run in that child while the proxy's gRPC threads
		// are busy, and on a loaded machine the child dies in gRPC's poller
		// ("Check failed: next_worker->state == KICKED"): the session fails
		// with "Initialization failure from server". Without fork support
		// gRPC leaves the child alone; it execs at once.
		"GRPC_ENABLE_FORK_SUPPORT=0",
		"DASHBOARD_METRIC_PORT=" + strconv.Itoa(p.DashboardMetrics),
		"AUTOSCALER_METRIC_PORT=" + strconv.Itoa(p.AutoscalerMetrics),
		shimEnv + "=" + headIP + " " + headIP + " 0",
		shimLoopbackEnv + "=" + strings.Join(lo, ","),
	})
	return WithPythonPath(env, shimDir)
}

// LoopbackHost is where the shim binds the loopback ports (127.0.0.2:
// loopback, and not 127.0.0.1, which Ray's dashboard agent binds on the
// same port next).
const LoopbackHost = "127.0.0.2"
