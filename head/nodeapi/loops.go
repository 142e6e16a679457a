package nodeapi

import (
	"context"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/ctxsleep"
	"github.com/rayvast/rayvast/internal/wire"
)

// HealthChecker polls a node's guest API health with its token (the real
// one is head/healthpoll).
type HealthChecker interface {
	Check(ctx context.Context, ip string, port int, token string) error
}

// WatchLost marks nodes lost after 3 intervals in which the head could hear
// them and hands each to destroy, until ctx ends. It looks a few times per
// interval; a tick that comes late or with the wall clock moved gives every
// node a fresh grace first (StallWatch).
func (s *Server) WatchLost(ctx context.Context, destroy func(candidateID, reason string)) {
	period := max(s.cfg.Interval/4, 50*time.Millisecond)
	w, start := NewStallWatch(period), time.Now()
	s.SweepAt(w, time.Now(), 0, destroy)
	ctxsleep.Every(ctx, period, func() { s.SweepAt(w, time.Now(), time.Since(start), destroy) })
}

// SweepAt runs one lost sweep at a tick of w (wall and monotonic time).
func (s *Server) SweepAt(w *StallWatch, wall time.Time, mono time.Duration, destroy func(candidateID, reason string)) {
	if w.Tick(wall, mono) {
		s.cfg.Registry.Grace()
		s.cfg.Log.Info("every node gets a fresh grace of 3 intervals: the head could not hear heartbeats for a while (start, stall or clock jump)")
	}
	s.SweepLost(destroy)
}

// SweepLost runs one lost sweep, and destroys candidates whose interrupted
// enrollment was not retried in time.
func (s *Server) SweepLost(destroy func(candidateID, reason string)) {
	for _, id := range s.cfg.Registry.ExpireInterrupted() {
		s.cfg.Log.Warn("interrupted enrollment not retried in time", "candidate", id)
		destroy(id, "enrollment_interrupted")
	}
	lost, err := s.cfg.Registry.SweepLost(s.cfg.Interval)
	if err != nil {
		s.cfg.Log.Error("save lost nodes", "err", err)
	}
	for _, n := range lost {
		s.cfg.Log.Warn("node lost", "instance", n.InstanceID, "candidate", n.CandidateID)
		destroy(n.CandidateID, "lost")
	}
}

// PollHealth polls every enrolled node that sent a health token, once per
// interval, until ctx ends.
func (s *Server) PollHealth(ctx context.Context, hc HealthChecker, threshold int) {
	ctxsleep.Every(ctx, s.cfg.Interval, func() { s.PollOnce(ctx, hc, threshold) })
}

// PollOnce polls every enrolled node once, a few at a time.
func (s *Server) PollOnce(ctx context.Context, hc HealthChecker, threshold int) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, n := range s.cfg.Registry.Nodes() {
		tok, ok := s.HealthToken(n.InstanceID)
		if n.State != wire.StateEnrolled || !ok || n.GuestAPIPort == 0 {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			cctx, cancel := context.WithTimeout(ctx, max(s.cfg.Interval/2, time.Second))
			defer cancel()
			err := hc.Check(cctx, n.PublicIP, n.GuestAPIPort, tok.Reveal())
			s.cfg.Metrics.HealthPoll(err == nil)
			if err != nil {
				s.cfg.Log.Debug("health poll failed", "instance", n.InstanceID, "err", err)
			}
			s.cfg.Registry.SetHealth(n.InstanceID, err == nil, threshold)
		}()
	}
	wg.Wait()
}
