package supervise

import "time"

// Defaults of the restart policy (docs/protocol.md §9: Ray exiting on its own is
// restarted with backoff; too many restarts in a window end the node).
// Five crashes in ten minutes is no passing fault: the rental is better
// given back than kept paying for a node that cannot hold Ray.
const (
	DefaultMaxRestarts  = 5
	DefaultWindow       = 10 * time.Minute
	DefaultRestartDelay = time.Second
	MaxRestartDelay     = 30 * time.Second // the backoff's cap (or Delay, when larger)
)

// RestartPolicy says whether and when a child that exited on its own is
// started again.
type RestartPolicy struct {
	MaxRestarts int           // restarts allowed within Window; 0 = none
	Window      time.Duration // sliding
	Delay       time.Duration // before the first restart in a window; doubles with each
}

// DefaultRestartPolicy is the policy when the agent's environment names none.
func DefaultRestartPolicy() RestartPolicy {
	return RestartPolicy{MaxRestarts: DefaultMaxRestarts, Window: DefaultWindow, Delay: DefaultRestartDelay}
}

// Restarts tracks one child's restarts against a policy. Not safe for
// concurrent use: the agent's restart loop owns it.
type Restarts struct {
	policy RestartPolicy
	recent []time.Time // restarts within the window, oldest first
	total  int
}

// NewRestarts starts counting for p.
func NewRestarts(p RestartPolicy) *Restarts { return &Restarts{policy: p} }

// Exited judges an exit at now: restart after delay (ok), or give up
// (crash loop) because MaxRestarts restarts already happened within the
// window. A restart it allows is counted at once.
func (r *Restarts) Exited(now time.Time) (delay time.Duration, ok bool) {
	cut := now.Add(-r.policy.Window)
	keep := r.recent[:0]
	for _, t := range r.recent {
		if t.After(cut) {
			keep = append(keep, t)
		}
	}
	r.recent = keep
	if len(r.recent) >= r.policy.MaxRestarts {
		return 0, false
	}
	delay = r.policy.Delay
	capped := max(MaxRestartDelay, r.policy.Delay)
	for range len(r.recent) {
		delay = min(2*delay, capped)
	}
	r.recent = append(r.recent, now)
	r.total++
	return delay, true
}

// Forced counts a restart the agent chose (the child did not fail): it is
// in Total but not in the window that judges a crash loop.
func (r *Restarts) Forced() { r.total++ }

// Total is the number of restarts allowed so far, over the child's life.
func (r *Restarts) Total() int { return r.total }
