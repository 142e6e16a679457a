package supervise

import (
	"testing"
	"time"
)

// TestRestartsPolicy walks a sequence of exits through the policy: the
// delay doubles within a window, the (K+1)th exit within the window is a
// crash loop, and exits spread wider than the window never are.
func TestRestartsPolicy(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := RestartPolicy{MaxRestarts: 3, Window: time.Minute, Delay: time.Second}
	type exit struct {
		at        time.Duration
		wantDelay time.Duration
		wantOK    bool
	}
	for _, tc := range []struct {
		name   string
		policy RestartPolicy
		exits  []exit
		total  int
	}{
		{"crash loop on the 4th exit within the window", p, []exit{
			{0, time.Second, true}, {2 * time.Second, 2 * time.Second, true}, {5 * time.Second, 4 * time.Second, true},
			{10 * time.Second, 0, false}}, 3},
		{"exits a window apart never loop, delay stays short", p, []exit{
			{0, time.Second, true}, {61 * time.Second, time.Second, true}, {122 * time.Second, time.Second, true},
			{183 * time.Second, time.Second, true}, {244 * time.Second, time.Second, true}}, 5},
		{"old restarts slide out of the window", p, []exit{
			{0, time.Second, true}, {30 * time.Second, 2 * time.Second, true}, {40 * time.Second, 4 * time.Second, true},
			{61 * time.Second, 4 * time.Second, true}, {62 * time.Second, 0, false}}, 4},
		{"zero restarts: the first exit is a crash loop", RestartPolicy{Window: time.Minute, Delay: time.Second},
			[]exit{{0, 0, false}}, 0},
		{"delay capped", RestartPolicy{MaxRestarts: 10, Window: time.Hour, Delay: 10 * time.Second}, []exit{
			{0, 10 * time.Second, true}, {time.Minute, 20 * time.Second, true}, {2 * time.Minute, MaxRestartDelay, true},
			{3 * time.Minute, MaxRestartDelay, true}}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRestarts(tc.policy)
			for i, e := range tc.exits {
				d, ok := r.Exited(t0.Add(e.at))
				if d != e.wantDelay || ok != e.wantOK {
					t.Errorf("exit %d at %v: got (%v, %v), want (%v, %v)", i, e.at, d, ok, e.wantDelay, e.wantOK)
				}
			}
			if got := r.Total(); got != tc.total {
				t.Errorf("Total: got %d, want %d", got, tc.total)
			}
		})
	}
}
