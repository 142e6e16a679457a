package vast

import (
	"testing"
	"time"
)

// TestIntervalsFromSettings: intervals_s overrides vast's limits per
// endpoint; an unknown endpoint or a negative interval is refused.
func TestIntervalsFromSettings(t *testing.T) {
	lim, err := limitsFrom(map[string]float64{"create": 10, "list": 0.5})
	if err != nil || lim.Interval[EpCreate] != 10*time.Second || lim.Interval[EpList] != 500*time.Millisecond || lim.Interval[EpShow] != 2*time.Second {
		t.Errorf("limits = %v, %v", lim.Interval, err)
	}
	for _, bad := range []map[string]float64{{"creates": 1}, {"show": -1}} {
		if _, err := limitsFrom(bad); err == nil {
			t.Errorf("limitsFrom(%v) = nil error", bad)
		}
	}
}
