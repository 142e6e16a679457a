package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/agent/envconfig"
	"github.com/rayvast/rayvast/agent/selfend"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestSelfEnderByProvider: vast's container (CONTAINER_API_KEY and
// CONTAINER_ID set) ends itself by destroying exactly its own instance,
// at RAYVAST_VAST_URL when set; any other (the docker provider sets
// neither) by the agent's exit.
func TestSelfEnderByProvider(t *testing.T) {
	a := &agent{cfg: envconfig.Config{ContainerAPIKey: secret.New("k-31"), VastContainerID: "31000004", InstanceID: "31000004", VastURL: "http://192.0.2.1:9"}}
	v, ok := a.selfEnder().(selfend.Vast)
	if !ok || v.InstanceID != "31000004" || v.Key.Reveal() != "k-31" || v.BaseURL != "http://192.0.2.1:9" {
		t.Errorf("vast container: %#v", a.selfEnder())
	}
	for _, cfg := range []envconfig.Config{{InstanceID: "rv-docker-1"}, {InstanceID: "x", ContainerAPIKey: secret.New("k")}} {
		if _, ok := (&agent{cfg: cfg}).selfEnder().(selfend.Exit); !ok {
			t.Errorf("%+v: %T, want the agent's exit", cfg, (&agent{cfg: cfg}).selfEnder())
		}
	}
}

// TestWarnNoKeyOnVast: a node the head says rents on vast (the bundle's
// heartbeat.self_end "vast") warns at enrollment when it lacks
// CONTAINER_API_KEY or CONTAINER_ID (its exit would leave the instance
// billing its disk); with both, or off vast, it says nothing.
func TestWarnNoKeyOnVast(t *testing.T) {
	for _, c := range []struct {
		cfg     envconfig.Config
		selfEnd string
		warn    bool
	}{
		{envconfig.Config{InstanceID: "31000004", VastContainerID: "31000004"}, wire.ProviderVast, true},
		{envconfig.Config{InstanceID: "31000004", ContainerAPIKey: secret.New("k")}, wire.ProviderVast, true},
		{envconfig.Config{InstanceID: "31000004", VastContainerID: "31000004", ContainerAPIKey: secret.New("k")}, wire.ProviderVast, false},
		{envconfig.Config{InstanceID: "rv-docker-1"}, "", false},
	} {
		var logs bytes.Buffer
		a := &agent{cfg: c.cfg, log: slog.New(slog.NewTextHandler(&logs, nil))}
		a.warnNoKey(c.selfEnd)
		if got := strings.Contains(logs.String(), "cannot destroy its own instance"); got != c.warn {
			t.Errorf("%+v on %q: warned %v, want %v:\n%s", c.cfg, c.selfEnd, got, c.warn, logs.String())
		}
	}
}
