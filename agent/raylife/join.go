package raylife

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// DefaultJoinTimeout bounds how long Ray may take from its start to
// joining the cluster before the agent reports that it did not join (with
// Ray's last words). Ray's own start gives up after about a minute (its
// GCS connect retries, then 30 s for the raylet to register).
const DefaultJoinTimeout = 2 * time.Minute

// joinState is whether Ray's current start has joined the cluster, and
// the bound on it; guarded by Ray.mu.
type joinState struct {
	timeout   time.Duration
	lastWords func() string // the end of Ray's output; nil = none
	gen       int           // counts starts of Ray; a joined call of an older start is stale
	liveGen   int           // the start whose process runs (launch recorded it)
	joinedGen int           // the latest start that said it joined
	startedAt time.Time     // of the current start
	timer     *time.Timer
}

// nextGen counts a new start of Ray.
func (r *Ray) nextGen() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.join.gen++
	return r.join.gen
}

// armJoin, with r.mu held, begins the join bound of start gen, which
// launch has just recorded as starting.
func (r *Ray) armJoin(gen int) {
	if r.join.joinedGen == gen { // Ray said so before we got here
		r.status.State = wire.RayRunning
	}
	r.join.startedAt = r.now()
	r.stopJoinTimer()
	r.join.timer = time.AfterFunc(r.join.timeout, func() { r.notJoined(gen) })
}

// stopJoinTimer, with r.mu held, disarms the join bound: Ray joined or
// exited.
func (r *Ray) stopJoinTimer() {
	if r.join.timer != nil {
		r.join.timer.Stop()
	}
}

// joined records that Ray of start gen said its node is in the cluster.
func (r *Ray) joined(gen int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.join.joinedGen = max(r.join.joinedGen, gen)
	if gen != r.join.liveGen || r.status.State != wire.RayStarting {
		return
	}
	r.status.State = wire.RayRunning
	r.stopJoinTimer()
	r.log.Info("ray joined the cluster", "pid", r.status.PID, "after", r.now().Sub(r.join.startedAt).Round(time.Millisecond))
}

// notJoined reports a Ray of start gen that has not joined within the bound.
func (r *Ray) notJoined(gen int) {
	r.mu.Lock()
	stale := gen != r.join.liveGen || r.status.State != wire.RayStarting
	r.mu.Unlock()
	if stale {
		return
	}
	words := ""
	if r.join.lastWords != nil {
		words = r.join.lastWords()
	}
	r.log.Warn("ray has not joined the cluster", "after", r.join.timeout, "ray_last_words", words)
	r.report(wire.EventRayNotJoined, fmt.Sprintf("not joined after %s; Ray's last words: %s", r.join.timeout, words))
}

// startedLine is what `ray start` prints once its node is in the
// cluster: Ray 2.52 and 2.60 (ray/scripts/scripts.py, `start`) print it
// after ray/_private/node.py found the node in the GCS, so ray.nodes()
// lists it from then on.
const startedLine = "Ray runtime started"

// CopyOutput copies Ray's output line by line to w and calls joined at
// the first line that says Ray's runtime started.
func CopyOutput(r io.Reader, w io.Writer, joined func()) {
	br := bufio.NewReader(r)
	said := false
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			_, _ = io.WriteString(w, line)
			if !said && strings.Contains(line, startedLine) {
				said = true
				joined()
			}
		}
		if err != nil {
			return
		}
	}
}
