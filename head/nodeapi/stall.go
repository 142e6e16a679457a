package nodeapi

import "time"

// StallWatch tells, from the lost sweep's own ticks, when the head could not
// have heard heartbeats (docs/protocol.md §7): the gap since the last tick, measured on
// the monotonic clock, is far longer than the tick period (the process was
// stopped, the machine suspended, a pause), or the wall clock moved apart
// from the monotonic one (a clock jump, which would make every node look
// silent or fresh at once).
type StallWatch struct {
	period time.Duration
	wall   time.Time
	mono   time.Duration
	primed bool
}

// NewStallWatch watches ticks meant to come every period.
func NewStallWatch(period time.Duration) *StallWatch { return &StallWatch{period: period} }

// Tick records one tick at wall clock time wall and monotonic time mono and
// reports whether the head was deaf since the last one. The first tick is
// deaf: the head just started.
func (w *StallWatch) Tick(wall time.Time, mono time.Duration) bool {
	defer func() { w.wall, w.mono, w.primed = wall, mono, true }()
	if !w.primed {
		return true
	}
	gap := mono - w.mono
	drift := wall.Sub(w.wall) - gap
	return gap > 2*w.period || drift > w.period || drift < -w.period
}
