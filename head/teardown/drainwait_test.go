package teardown

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// loopHead is a running head whose own loop ends its enrolled node e1
// (after draining it) once `at` has passed; End records what head down
// ended through the admin API.
type loopHead struct {
	mu    sync.Mutex
	at    time.Time
	cands []wire.Candidate
	ends  []string
}

func (h *loopHead) Candidates(context.Context) ([]wire.Candidate, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Now().After(h.at) {
		for i := range h.cands {
			if h.cands[i].State == wire.StateEnrolled {
				h.cands[i].State = wire.StateEnded
			}
		}
	}
	return slices.Clone(h.cands), nil
}

func (h *loopHead) End(_ context.Context, id, _ string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ends = append(h.ends, id)
	for i := range h.cands {
		if h.cands[i].CandidateID == id {
			h.cands[i].State = wire.StateEnded
		}
	}
	return nil
}

// TestDrainWait: with DrainWait, head down ends a candidate not enrolled
// at once but leaves the enrolled one to the head's loop (which drains it
// in Ray), ending it itself only if the loop has not within DrainWait;
// without DrainWait both are ended at once.
func TestDrainWait(t *testing.T) {
	for _, c := range []struct {
		name      string
		wait      time.Duration
		loopAfter time.Duration
		want      []string
	}{
		{"loop drains in time", 2 * time.Second, 50 * time.Millisecond, []string{"p1"}},
		{"loop too slow", 100 * time.Millisecond, time.Hour, []string{"p1", "e1"}},
		{"no drain wait", 0, 50 * time.Millisecond, []string{"e1", "p1"}},
	} {
		h := &loopHead{at: time.Now().Add(c.loopAfter), cands: []wire.Candidate{
			{CandidateID: "e1", State: wire.StateEnrolled}, {CandidateID: "p1", State: wire.StatePending}}}
		_, err := Down(context.Background(), Config{StateDir: t.TempDir(), Cluster: h, DrainWait: c.wait, Poll: 10 * time.Millisecond, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(h.ends, c.want) {
			t.Errorf("%s: ended through the admin API %v; want %v", c.name, h.ends, c.want)
		}
	}
}
