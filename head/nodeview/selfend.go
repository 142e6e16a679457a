package nodeview

import (
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// selfEnd says when the node ends its own rental if the head stays silent
// (issue 31): its limit, counted from its last heartbeat (or enrollment).
func (s Story) selfEnd(n *wire.Node) string {
	if n.UnheardLimitS <= 0 {
		return "never (unheard_limit_s 0, or enrolled before the head gave limits)"
	}
	limit := time.Duration(n.UnheardLimitS) * time.Second
	from := n.EnrolledAt
	if n.LastHeartbeat != nil {
		from = *n.LastHeartbeat
	}
	at := from.Add(limit)
	left := "passed"
	if d := at.Sub(s.Now); d > 0 {
		left = "in " + d.Round(time.Second).String()
	}
	return "after " + limit.String() + " unheard: at " + at.UTC().Format(time.RFC3339) + " (" + left + ") if the head stays silent"
}
