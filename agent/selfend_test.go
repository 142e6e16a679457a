package main

import (
	"testing"

	"github.com/rayvast/rayvast/agent/envconfig"
	"github.com/rayvast/rayvast/agent/selfend"
	"github.com/rayvast/rayvast/internal/secret"
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
