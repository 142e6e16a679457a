package nodeview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/termtext"
	"github.com/rayvast/rayvast/internal/wire"
)

// Story is everything `head node` knows of one node. Info and AgentLog are
// what its guest API answered (nil or empty when it could not be asked);
// InfoErr and LogErr say why not.
type Story struct {
	Match    Match
	Info     *wire.GuestInfo
	InfoErr  error
	AgentLog []byte
	LogErr   error
	Now      time.Time
}

// Print writes the story: one "key  value" line per fact, then the agent's
// last log lines. Every value is made inert (termtext): all of it came from
// a provider, a node or the admin API.
func (s Story) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, termtext.Field(v)) }
	if c := s.Match.Candidate; c != nil {
		line("candidate", c.CandidateID)
		line("node type", c.NodeType)
		line("instance", dash(c.InstanceID))
		line("public ip", dash(c.PublicIP))
		line("host", dash(c.HostID))
		st := c.State
		if c.Reason != "" {
			st += " (" + c.Reason + ")"
		}
		line("candidate state", st+", since "+s.when(c.UpdatedAt))
		line("created", s.when(c.CreatedAt))
		if c.DPHTotal > 0 {
			cost := fmt.Sprintf("$%.3f/h", c.DPHTotal)
			if c.RentedAt != nil {
				cost += fmt.Sprintf(", $%.4f so far (rented %s)", metrics.Cost(*c, s.Now), s.when(*c.RentedAt))
			}
			line("price", cost)
		}
	}
	if n := s.Match.Node; n != nil {
		if s.Match.Candidate == nil {
			line("instance", n.InstanceID)
			line("candidate", n.CandidateID)
			line("node type", n.NodeType)
			line("public ip", n.PublicIP)
		}
		line("node state", n.State)
		line("enrolled", s.when(n.EnrolledAt))
		hb := "never"
		if n.LastHeartbeat != nil {
			hb = s.when(*n.LastHeartbeat) + fmt.Sprintf(" (seq %d)", n.Seq)
		}
		line("last heartbeat", hb)
		line("ends itself", s.selfEnd(n))
		line("ray", rayLine(n.Ray))
		if r := n.RayReport; r != nil {
			line("last ray report", r.Event+", "+s.when(r.At)+prefixed(": ", r.Detail))
		}
		line("health", fmt.Sprintf("%s, %d failed polls in a row", n.Health, n.HealthFailures))
		line("guest api", fmt.Sprintf("%s:%d", n.PublicIP, n.GuestAPIPort))
	} else {
		line("node", "never enrolled")
		if c := s.Match.Candidate; c != nil && c.Reported != nil {
			line("reported", "by its agent at enrollment, before the rejection")
			reportLines(line, c.Reported)
			line("ray / python", dash(c.Reported.RayVersion)+" / "+dash(c.Reported.PythonVersion))
		}
	}
	s.printInfo(line)
	tw.Flush()
	s.printLog(w)
}

func (s Story) printInfo(line func(k, v string)) {
	switch {
	case s.Info == nil && s.InfoErr != nil:
		line("host checks", "not asked: "+s.InfoErr.Error())
	case s.Info == nil:
		return
	case s.Info.TCB == nil || s.Info.TCB.Checks == nil:
		line("host checks", "not shown by the node (public_tcbinfo off)")
	default:
		reportLines(line, s.Info.TCB.Checks)
		line("agent sha256", s.Info.TCB.AgentSHA256)
	}
	if s.Info != nil {
		line("switches", fmt.Sprintf("public_logs=%t public_sysinfo=%t public_tcbinfo=%t",
			s.Info.PublicLogs, s.Info.PublicSysinfo, s.Info.PublicTCBInfo))
	}
}

// reportLines prints host checks and GPUs, as a node's guest API shows
// them or as a rejected agent reported them.
func reportLines(line func(k, v string), r *wire.CheckReport) {
	var checks []string
	for _, ch := range r.Checks.List() {
		if ip := r.Checks.Egress.IP; ch.Name == "egress" && ip != "" {
			ch.Detail = strings.TrimSpace(ch.Detail + " ip " + ip)
		}
		checks = append(checks, check(ch.Name, ch.Check))
	}
	line("host checks", strings.Join(checks, ", "))
	gpus := fmt.Sprintf("%d", r.GPUs)
	if len(r.GPUModels) > 0 {
		gpus += ": " + strings.Join(r.GPUModels, ", ")
	}
	line("gpus", gpus)
}

func (s Story) printLog(w io.Writer) {
	switch {
	case len(s.AgentLog) > 0:
		fmt.Fprintln(w, "\nlast lines of the agent's log:")
		fmt.Fprint(w, termtext.Lines(string(LastLines(s.AgentLog, 15))))
	case s.LogErr != nil:
		first, _, _ := strings.Cut(s.LogErr.Error(), "\n")
		fmt.Fprintf(w, "\nagent log: %s\n", termtext.Field(first))
	}
}

func (s Story) when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), s.Now.Sub(t).Round(time.Second))
}

func rayLine(r wire.RayStatus) string {
	if r.State == "" {
		return "not reported yet"
	}
	out := fmt.Sprintf("%s, pid %d, %d restarts", r.State, r.PID, r.Restarts)
	if r.ExitCode != nil {
		out += fmt.Sprintf(", last exit code %d", *r.ExitCode)
	}
	return out
}

func check(name string, c wire.Check) string {
	if c.OK {
		return name + " ok"
	}
	if c.Detail != "" {
		return name + " FAILED (" + c.Detail + ")"
	}
	return name + " FAILED"
}

// prefixed is sep+s, or nothing when s is empty.
func prefixed(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
