// Package metrics counts what the head decides and writes it in the
// Prometheus text format (docs/protocol.md §8 GET /metrics). Counters only; gauges of
// candidates and nodes by state are computed from the registry at scrape time.
package metrics

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// Enrollment outcomes.
const (
	OutcomeEnrolled    = "enrolled"
	OutcomeRefused     = "refused"
	OutcomeRejected    = "rejected"
	OutcomeMalformed   = "malformed"
	OutcomeRateLimited = "rate_limited"
	OutcomeError       = "error"
	OutcomeBusy        = "busy" // 503: no port check turn in time, the agent retries
)

// Metrics is safe for concurrent use. The zero value is ready.
type Metrics struct {
	// Now dates the spend gauge (default time.Now).
	Now func() time.Time
	// PortChecks, when set, reports the port check gate: its current
	// limit, checks running and enrollments waiting for a turn.
	PortChecks func() (limit, running, waiting int)

	mu          sync.Mutex
	enrollments map[string]uint64 // outcome
	rejections  map[string]uint64 // reason
	refusals    map[[2]string]uint64
	heartbeats  uint64
	reports     uint64
	healthPolls map[string]uint64 // ok / fail
	pruned      uint64
	downloads   uint64
}

// AgentDownload counts one GET /bootstrap served (an image with the agent
// built in boots without one).
func (m *Metrics) AgentDownload() { m.mu.Lock(); m.downloads++; m.mu.Unlock() }

// Pruned counts ended candidates dropped from the registry after the
// retention period (their gauges stop counting them).
func (m *Metrics) Pruned(n int) { m.mu.Lock(); m.pruned += uint64(n); m.mu.Unlock() }

func inc[K comparable](m *map[K]uint64, k K) {
	if *m == nil {
		*m = map[K]uint64{}
	}
	(*m)[k]++
}

// Enrollment counts one POST /enroll by outcome.
func (m *Metrics) Enrollment(outcome string) {
	m.mu.Lock()
	inc(&m.enrollments, outcome)
	m.mu.Unlock()
}

// Rejection counts one rejection after a valid token by reason.
func (m *Metrics) Rejection(reason string) { m.mu.Lock(); inc(&m.rejections, reason); m.mu.Unlock() }

// Refusal counts one refusal (before a valid token on port A, or a forbidden
// request on port B) by endpoint and reason.
func (m *Metrics) Refusal(endpoint, reason string) {
	m.mu.Lock()
	inc(&m.refusals, [2]string{endpoint, reason})
	m.mu.Unlock()
}

// Heartbeat counts one accepted heartbeat.
func (m *Metrics) Heartbeat() { m.mu.Lock(); m.heartbeats++; m.mu.Unlock() }

// Report counts one accepted report.
func (m *Metrics) Report() { m.mu.Lock(); m.reports++; m.mu.Unlock() }

// HealthPoll counts one guest API health poll.
func (m *Metrics) HealthPoll(ok bool) {
	r := "fail"
	if ok {
		r = "ok"
	}
	m.mu.Lock()
	inc(&m.healthPolls, r)
	m.mu.Unlock()
}

var allStates = []string{wire.StatePending, wire.StateRented, wire.StateRunning, wire.StateEnrolled,
	wire.StateLost, wire.StateEnded, wire.StateDestroyRequested}

// Write prints every metric in the Prometheus text format.
func (m *Metrics) Write(w io.Writer, cands []wire.Candidate, nodes []wire.Node) error {
	var b strings.Builder
	cs, ns, hs := map[string]int{}, map[string]int{}, map[string]int{}
	for _, c := range cands {
		cs[c.State]++
	}
	for _, n := range nodes {
		ns[n.State]++
		if n.State == wire.StateEnrolled {
			hs[n.Health]++
		}
	}
	header(&b, "rayvast_candidates", "gauge", "Candidates by state.")
	for _, s := range allStates {
		fmt.Fprintf(&b, "rayvast_candidates{state=%q} %d\n", s, cs[s])
	}
	header(&b, "rayvast_nodes", "gauge", "Nodes by state.")
	for _, s := range allStates {
		if s == wire.StateEnrolled || s == wire.StateLost || s == wire.StateEnded {
			fmt.Fprintf(&b, "rayvast_nodes{state=%q} %d\n", s, ns[s])
		}
	}
	header(&b, "rayvast_nodes_health", "gauge", "Enrolled nodes by guest API health.")
	for _, h := range []string{wire.HealthUnknown, wire.HealthHealthy, wire.HealthUnhealthy} {
		fmt.Fprintf(&b, "rayvast_nodes_health{health=%q} %d\n", h, hs[h])
	}
	writeMoney(&b, cands, m.now())
	if m.PortChecks != nil {
		limit, running, waiting := m.PortChecks()
		header(&b, "rayvast_port_checks", "gauge", "Port checks: the adaptive limit, running, and enrollments waiting for a turn.")
		fmt.Fprintf(&b, "rayvast_port_checks{kind=\"limit\"} %d\nrayvast_port_checks{kind=\"running\"} %d\nrayvast_port_checks{kind=\"waiting\"} %d\n", limit, running, waiting)
	}
	m.mu.Lock()
	header(&b, "rayvast_enrollments_total", "counter", "POST /enroll requests by outcome.")
	writeMap(&b, "rayvast_enrollments_total", "outcome", m.enrollments)
	header(&b, "rayvast_enroll_rejections_total", "counter", "Enrollments rejected after a valid token, by reason.")
	writeMap(&b, "rayvast_enroll_rejections_total", "reason", m.rejections)
	header(&b, "rayvast_refusals_total", "counter", "Requests refused before authentication, by endpoint and reason.")
	keys := make([][2]string, 0, len(m.refusals))
	for k := range m.refusals {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(&b, "rayvast_refusals_total{endpoint=%q,reason=%q} %d\n", k[0], k[1], m.refusals[k])
	}
	header(&b, "rayvast_heartbeats_total", "counter", "Accepted heartbeats.")
	fmt.Fprintf(&b, "rayvast_heartbeats_total %d\n", m.heartbeats)
	header(&b, "rayvast_reports_total", "counter", "Accepted reports.")
	fmt.Fprintf(&b, "rayvast_reports_total %d\n", m.reports)
	header(&b, "rayvast_health_polls_total", "counter", "Guest API health polls by result.")
	writeMap(&b, "rayvast_health_polls_total", "result", m.healthPolls)
	header(&b, "rayvast_candidates_pruned_total", "counter", "Ended candidates dropped after the retention period.")
	fmt.Fprintf(&b, "rayvast_candidates_pruned_total %d\n", m.pruned)
	header(&b, "rayvast_agent_downloads_total", "counter", "The agent served at GET /bootstrap.")
	fmt.Fprintf(&b, "rayvast_agent_downloads_total %d\n", m.downloads)
	m.mu.Unlock()
	_, err := io.WriteString(w, b.String())
	return err
}

func header(b *strings.Builder, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func writeMap(b *strings.Builder, name, label string, m map[string]uint64) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(b, "%s{%s=%q} %d\n", name, label, k, m[k])
	}
}

func (m *Metrics) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// writeMoney prints $/hour per billing rental, per node type and for the
// cluster, and the spend so far (ended candidates included).
func writeMoney(b *strings.Builder, cands []wire.Candidate, now time.Time) {
	money := Spending(cands, now)
	header(b, "rayvast_rental_dph", "gauge", "$/hour of each billing rental.")
	for _, c := range cands {
		if Billing(c) {
			fmt.Fprintf(b, "rayvast_rental_dph{candidate_id=%q,instance_id=%q,node_type=%q,state=%q} %g\n", c.CandidateID, c.InstanceID, c.NodeType, c.State, c.DPHTotal)
		}
	}
	header(b, "rayvast_node_type_dph", "gauge", "$/hour of the billing rentals of each node type.")
	for _, n := range slices.Sorted(maps.Keys(money.NodeTypeDPH)) {
		fmt.Fprintf(b, "rayvast_node_type_dph{node_type=%q} %g\n", n, money.NodeTypeDPH[n])
	}
	header(b, "rayvast_cluster_dph", "gauge", "$/hour of every billing rental of the cluster.")
	fmt.Fprintf(b, "rayvast_cluster_dph %g\n", money.ClusterDPH)
	header(b, "rayvast_spend_dollars", "gauge", "Dollars spent so far on every candidate the registry holds, failed ones included.")
	fmt.Fprintf(b, "rayvast_spend_dollars %.6f\n", money.Spend)
}
