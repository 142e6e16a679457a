package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rayvast/rayvast/head/termtext"
	"github.com/rayvast/rayvast/internal/wire"
)

// container is what the demo sees of a candidate's container.
type container struct {
	State    string // running, exited, … ("" = none)
	ExitCode int
	LastLog  string // last line it wrote, summarised
}

// row is one candidate's line of the live table.
type row struct {
	ID, NodeType, Instance, IP, State, Step string
	Unsafe                                  bool
	Elapsed                                 time.Duration
	Done                                    bool // nothing more will happen on its own
	Node                                    bool // enrolled, Ray running
	created                                 time.Time
}

// buildRows joins the head's view (candidates, nodes) with Docker's. A
// node counts as running Ray only once a heartbeat at least settle after
// its enrollment still says running with no restart: Ray that dies in its
// first second (no shim behind the NAT) is reported running by the first
// heartbeat, and a demo that stopped there would call it a success.
func buildRows(cands []wire.Candidate, nodes []wire.Node, ctrs map[string]container, unsafe map[string]bool, now time.Time, settle time.Duration) []row {
	byInstance := map[string]wire.Node{}
	for _, n := range nodes {
		byInstance[n.InstanceID] = n
	}
	rows := make([]row, 0, len(cands))
	for _, c := range cands {
		r := row{ID: c.CandidateID, NodeType: c.NodeType, Instance: c.InstanceID, IP: c.PublicIP, State: c.State, Unsafe: unsafe[c.CandidateID], created: c.CreatedAt}
		ctr := ctrs[c.CandidateID]
		end := now
		switch c.State {
		case wire.StatePending:
			r.Step = "asking Docker for a container"
		case wire.StateRented:
			r.Step = "container created, waiting for its IP"
		case wire.StateRunning:
			switch {
			case ctr.State == "":
				r.Step = "container starting"
			case ctr.State != "running":
				r.Step = fmt.Sprintf("container %s (exit %d)", ctr.State, ctr.ExitCode)
				if ctr.LastLog != "" {
					r.Step += ": " + ctr.LastLog
				}
			case ctr.LastLog != "":
				r.Step = ctr.LastLog
			default:
				r.Step = "bootloader: fetching the agent"
			}
		case wire.StateEnrolled:
			n, ok := byInstance[c.InstanceID]
			switch {
			case !ok:
				r.Step = "enrolled"
			case n.Ray.Restarts > 0:
				r.Step = fmt.Sprintf("Ray restarted %d time", n.Ray.Restarts)
				if n.Ray.Restarts > 1 {
					r.Step += "s"
				}
				if n.Ray.ExitCode != nil {
					r.Step += fmt.Sprintf(" (last exit code %d)", *n.Ray.ExitCode)
				}
				r.Done = true
			case n.Ray.State == wire.RayRunning && n.LastHeartbeat != nil && n.LastHeartbeat.Sub(n.EnrolledAt) >= settle:
				r.Step = "Ray running" + heartbeatAge(n, now)
				r.Node, r.Done = true, true
				end = n.EnrolledAt
			case n.Ray.State == wire.RayRunning:
				r.Step = "Ray joined, waiting a heartbeat interval to see it stay up"
			case n.Ray.State == wire.RayStarting:
				r.Step = "Ray starting: not in the Ray cluster yet" + heartbeatAge(n, now)
			default:
				r.Step = "Ray " + n.Ray.State + heartbeatAge(n, now)
			}
		case wire.StateLost:
			r.Step = "lost: no heartbeat for 3 intervals"
			r.Done, end = true, c.UpdatedAt
		case wire.StateEnded, wire.StateDestroyRequested:
			r.Step = "ended"
			if c.Reason != "" {
				r.Step = "refused: " + c.Reason
			}
			r.Done, end = true, c.UpdatedAt
		default:
			r.Step = c.State
		}
		if !c.CreatedAt.IsZero() && end.After(c.CreatedAt) {
			r.Elapsed = end.Sub(c.CreatedAt)
		}
		rows = append(rows, r.inert())
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].created.Before(rows[j].created) })
	return rows
}

func heartbeatAge(n wire.Node, now time.Time) string {
	if n.LastHeartbeat == nil {
		return ""
	}
	return fmt.Sprintf(", heartbeat %ds ago", int(now.Sub(*n.LastHeartbeat).Seconds()))
}

// allDone: every candidate has reached an outcome.
func allDone(rows []row, want int) bool {
	if len(rows) < want {
		return false
	}
	for _, r := range rows {
		if !r.Done {
			return false
		}
	}
	return true
}

// renderTable writes the live table: one line per candidate.
func renderTable(w io.Writer, rows []row) int {
	fmt.Fprintf(w, liveFormat+"%s\n", "CANDIDATE", "TYPE", "STATE", "ELAPSED", "STEP")
	for _, r := range rows {
		fmt.Fprintf(w, liveFormat+"%s\n", clip(r.ID, 18), r.typeName(), r.State, seconds(r.Elapsed), clip(r.Step, 70))
	}
	return len(rows) + 1
}

// liveFormat (candidate, type, state, elapsed, then the step) leaves an
// 80-column terminal 31 columns for the step.
const liveFormat = "%-18s %-11s %-8s %6s  "

// tableFormat is the summary's: candidate, type, ip, state, time, result.
const tableFormat = "%-18s %-11s %-15s %-8s %6s  "

// inert makes every printed field of the row safe for the terminal: all
// of them come from the admin API, a node or a container.
func (r row) inert() row {
	for _, f := range []*string{&r.ID, &r.NodeType, &r.Instance, &r.IP, &r.State, &r.Step} {
		*f = inert(*f)
	}
	return r
}

func (r row) typeName() string {
	if r.Unsafe {
		return clip(r.NodeType, 10) + "*"
	}
	return clip(r.NodeType, 11)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

var (
	textMsg = regexp.MustCompile(`\bmsg=("(?:[^"\\]|\\.)*"|\S+)`)
	ansi    = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
)

// summarizeLog turns the last log line of a container into a short step:
// the msg of a slog text or JSON line, else the line itself.
func summarizeLog(out []byte) string { return inert(summarize(out)) }

// inert makes a candidate's text safe to print on the operator's terminal.
func inert(s string) string { return termtext.Field(s) }

// inertArgs makes every text argument of a print inert: strings, errors and
// Stringers (numbers pass as they are).
func inertArgs(a []any) []any {
	out := make([]any, len(a))
	for i, v := range a {
		switch x := v.(type) {
		case string:
			out[i] = inert(x)
		case error:
			out[i] = inert(x.Error())
		case fmt.Stringer:
			out[i] = inert(x.String())
		default:
			out[i] = v
		}
	}
	return out
}

func summarize(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	line := strings.TrimSpace(ansi.ReplaceAllString(lines[len(lines)-1], ""))
	if strings.HasPrefix(line, "{") {
		var m struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Msg != "" {
			return m.Msg
		}
	}
	if m := textMsg.FindStringSubmatch(line); m != nil {
		if s, err := strconv.Unquote(m[1]); err == nil {
			return s
		}
		return m[1]
	}
	return line
}
