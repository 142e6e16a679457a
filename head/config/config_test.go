package config

import (
	"strings"
	"testing"
	"time"
)

const good = `{"cluster":"c","ray":{"head_address":"198.51.100.1:6379"},
 "node_types":{"gpu1":{"gpus":1,"max_workers":2,"resources":{"a100":1},"labels":{"zone":"x"}}},
 "guest_api":{"anonymous_scopes":["guest:health","guest:version"],
  "external_issuers":[{"name":"ops","public_keys":["` + key + `"]}]}}`

const key = "2f8d000000000000000000000000000000000000000000000000000000000001"

func TestParseGood(t *testing.T) {
	c, err := Parse(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.HeartbeatInterval != 30*time.Second || c.HealthFailureThreshold != 3 {
		t.Errorf("defaults: interval %v threshold %d", c.HeartbeatInterval, c.HealthFailureThreshold)
	}
	c, err = Parse(strings.NewReader(strings.Replace(good, `"cluster":"c"`, `"cluster":"c","heartbeat_interval_s":2`, 1)))
	if err != nil || c.HeartbeatInterval != 2*time.Second {
		t.Errorf("heartbeat_interval_s 2: %v %v", c, err)
	}
	if c.Autoscaler != nil {
		t.Errorf("no autoscaler block: Autoscaler = %+v, want nil (the head scales)", c.Autoscaler)
	}
	c, err = Parse(strings.NewReader(strings.Replace(good, `"cluster":"c"`, `"cluster":"c","autoscaler":{"idle_timeout_minutes":0.5}`, 1)))
	if err != nil || c.Autoscaler == nil || c.Autoscaler.IdleTimeoutMinutes != 0.5 {
		t.Errorf("autoscaler block: %+v %v", c, err)
	}
}

// TestParseRefuses proves each kind of bad config is refused with a reason
// naming the bad field.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"unknown scope", `"guest:health"`, `"guest:everything"`, "unknown scope"},
		{"short key", key, "abcd", "public_keys"},
		{"non-hex key", key, strings.Repeat("zz", 32), "public_keys"},
		{"unknown field", `"cluster":"c"`, `"cluster":"c","x":1`, "unknown field"},
		{"wrong type", `"gpus":1`, `"gpus":"1"`, "gpus"},
		{"bad head address", `198.51.100.1:6379`, `198.51.100.1`, "head_address"},
		{"negative gpus", `"gpus":1`, `"gpus":-1`, "gpus"},
		{"no node types", `"node_types":{"gpu1"`, `"node_types":{},"x":{"gpu1"`, "unknown field"},
		{"issuer no name", `"name":"ops"`, `"name":""`, "name"},
		{"trailing", `"]}]}}`, `"]}]}}{}`, "trailing"},
		{"negative idle timeout", `"cluster":"c"`, `"cluster":"c","autoscaler":{"idle_timeout_minutes":-1}`, "autoscaler.idle_timeout_minutes"},
		{"unknown autoscaler field", `"cluster":"c"`, `"cluster":"c","autoscaler":{"idle":5}`, "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(good, c.from, c.to, 1)
			if src == good {
				t.Fatalf("test did not change the config")
			}
			_, err := Parse(strings.NewReader(src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := Parse(strings.NewReader(`{"ray":{"head_address":"1.2.3.4:1"},"node_types":{}}`)); err == nil {
		t.Error("empty node_types accepted")
	}
}

// TestUnheardLimit: absent, a node may go 30 minutes unheard; 0 is never;
// a negative limit, or one under three heartbeat intervals (one lost beat
// would end nodes), is refused.
func TestUnheardLimit(t *testing.T) {
	with := func(s string) (*Config, error) {
		return Parse(strings.NewReader(strings.Replace(good, `"cluster":"c"`, `"cluster":"c"`+s, 1)))
	}
	for _, c := range []struct {
		extra string
		want  time.Duration
	}{{"", 30 * time.Minute}, {`,"unheard_limit_s":0`, 0}, {`,"unheard_limit_s":90`, 90 * time.Second},
		{`,"heartbeat_interval_s":2,"unheard_limit_s":6`, 6 * time.Second}} {
		cfg, err := with(c.extra)
		if err != nil || cfg.UnheardLimit() != c.want {
			t.Errorf("%q: %v %v, want %v", c.extra, cfg, err, c.want)
		}
	}
	for _, bad := range []string{`,"unheard_limit_s":-1`, `,"unheard_limit_s":89`, `,"heartbeat_interval_s":2,"unheard_limit_s":5`} {
		if _, err := with(bad); err == nil || !strings.Contains(err.Error(), "unheard_limit_s") {
			t.Errorf("%q: %v, want an unheard_limit_s error", bad, err)
		}
	}
}
