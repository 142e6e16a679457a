package nodeapi

import (
	"context"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// HealthChecker polls a node's guest API health with its token (the real
// one is head/healthpoll).
type HealthChecker interface {
	Check(ctx context.Context, ip string, port int, token string) error
}

// WatchLost marks nodes lost after 3 silent intervals and hands each to
// destroy, until ctx ends. It looks a few times per interval.
func (s *Server) WatchLost(ctx context.Context, destroy func(candidateID, reason string)) {
	t := time.NewTicker(max(s.cfg.Interval/4, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.SweepLost(destroy)
		}
	}
}

// SweepLost runs one lost sweep.
func (s *Server) SweepLost(destroy func(candidateID, reason string)) {
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
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.PollOnce(ctx, hc, threshold)
		}
	}
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
