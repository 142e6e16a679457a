package raylife

import (
	"log/slog"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// Reports delivers reports to the head one at a time, in order, off the
// restart loop's path: a head that is away must not delay Ray's restart.
type Reports struct {
	ch   chan wire.Report
	done chan struct{}
	log  *slog.Logger
}

// NewReports starts delivering through send.
func NewReports(send func(event, detail string), log *slog.Logger) *Reports {
	q := &Reports{ch: make(chan wire.Report, 64), done: make(chan struct{}), log: log}
	go func() {
		defer close(q.done)
		for r := range q.ch {
			send(r.Event, r.Detail)
		}
	}()
	return q
}

// Add queues one report; with the queue full (a head away for long) it is
// dropped and logged: the heartbeat still carries the restart count.
func (q *Reports) Add(event, detail string) {
	select {
	case q.ch <- wire.Report{Event: event, Detail: detail}:
	default:
		q.log.Warn("report queue full: dropping report", "event", event)
	}
}

// Close delivers what is queued, waiting at most limit.
func (q *Reports) Close(limit time.Duration) {
	close(q.ch)
	select {
	case <-q.done:
	case <-time.After(limit):
		q.log.Warn("reports not all delivered before exit")
	}
}
