package main

import (
	"context"
	"sync"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/agent/bundle"
	"github.com/rayvast/rayvast/agent/selfend"
	"github.com/rayvast/rayvast/agent/supervise"
	"github.com/rayvast/rayvast/internal/wire"
)

// selfEndRetry bounds the agent's tries to end its own rental: vast's
// destroy retried with backoff for up to ten minutes.
var selfEndRetry = backoff.RetryConfig{Policy: backoff.Policy{Base: 2 * time.Second, Max: time.Minute, Jitter: 0.2}, MaxElapsed: 10 * time.Minute}

// selfEnder is how this node ends its rental: vast's destroy of its own
// instance when vast gave it a key and an instance id, else the agent's
// exit (the docker provider: the container stops with its only process).
func (a *agent) selfEnder() selfend.Ender {
	if !a.cfg.ContainerAPIKey.IsZero() && a.cfg.VastContainerID != "" {
		return selfend.Vast{BaseURL: a.cfg.VastURL, InstanceID: a.cfg.VastContainerID, Key: a.cfg.ContainerAPIKey}
	}
	return selfend.Exit{}
}

// warnNoKey warns at enrollment when the head rents on vast (selfEnd
// "vast") but this node cannot destroy its own instance (no
// CONTAINER_API_KEY or CONTAINER_ID): its exit would leave an exited
// instance billing its disk.
func (a *agent) warnNoKey(selfEnd string) {
	if _, exits := a.selfEnder().(selfend.Exit); selfEnd == wire.ProviderVast && exits {
		a.log.Warn("on vast without "+wire.EnvVastAPIKey+" (or "+wire.EnvVastContainerID+"): this node cannot destroy its own instance; "+
			"if its head is gone it exits and the instance stays, billing its disk, until the head is back (it ends lost nodes' rentals) or you destroy it",
			"instance", a.cfg.InstanceID)
	}
}

// selfEndOnBeat is the heartbeat loop's OnBeat: once the watch says the
// head is gone it ends the rental (once), then Ray, so the agent exits.
func (a *agent) selfEndOnBeat(b *bundle.Bundle, sup *supervise.Supervisor) func(wire.Heartbeat, error) {
	limit := time.Duration(b.Heartbeat.UnheardLimitS) * time.Second
	w := selfend.NewWatch(limit, time.Now)
	if limit > 0 {
		a.log.Info("node ends its own rental when unheard", "limit", limit, "how", a.selfEnder().String())
	}
	a.warnNoKey(b.Heartbeat.SelfEnd)
	var once sync.Once
	return func(_ wire.Heartbeat, err error) {
		end, why := w.Beat(err)
		if !end {
			return
		}
		once.Do(func() {
			go func() {
				_ = selfend.Run(context.Background(), a.selfEnder(), why, w.Unheard(), selfEndRetry, a.log)
				sup.Stop()
			}()
		})
	}
}
