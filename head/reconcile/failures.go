package reconcile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rayvast/rayvast/internal/wire"
)

// tally is one node type's candidates as one tick sees them.
type tally struct {
	enrolled   int
	inflight   []wire.Candidate // oldest first
	failed     int              // within FailureWindow: rent spares
	failedLong int              // within PauseWindow: pause renting
	reasons    map[string]int   // of failedLong, for the pause's log line
	toReplace  []string         // RayScales: failed candidates to rent a spare for
}

// failLong counts one failure within the pause window under its reason.
func (t *tally) failLong(reason string) {
	t.failedLong++
	if t.reasons == nil {
		t.reasons = map[string]int{}
	}
	t.reasons[reason]++
}

// reasonList is "ray_version=7,egress=2": the commonest first, so the
// pause's log line says what to fix.
func reasonList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, ",")
}
