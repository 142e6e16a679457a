package config

import (
	"fmt"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// DefaultUnheardLimit is how long a node may go without a heartbeat
// answered before it ends its own rental (docs/protocol.md §9), when the config names
// none. Half an hour outlasts what a head's restart takes (a crash and a
// restart by hand, the head machine rebooting, a network blip) by far,
// so a head back within it keeps every node, and it bounds what a
// headless cluster bills: half an hour of each rental's $/h.
const DefaultUnheardLimit = 30 * time.Minute

// minUnheardIntervals is how many heartbeat intervals a non-zero limit
// must span, so one or two lost beats never end a node.
const minUnheardIntervals = 3

// UnheardLimit is the config's unheard_limit_s (absent: the default; 0:
// never).
func (c *Config) UnheardLimit() time.Duration {
	return unheardLimit(&c.Config)
}

func unheardLimit(c *wire.Config) time.Duration {
	if c.UnheardLimitS == nil {
		return DefaultUnheardLimit
	}
	return time.Duration(*c.UnheardLimitS) * time.Second
}

func validateUnheard(c *wire.Config) error {
	if c.UnheardLimitS == nil {
		return nil
	}
	s := *c.UnheardLimitS
	iv := int(DefaultHeartbeatInterval / time.Second)
	if c.HeartbeatIntervalS > 0 {
		iv = c.HeartbeatIntervalS
	}
	switch {
	case s < 0:
		return fmt.Errorf("unheard_limit_s: must not be negative (0: never)")
	case s > 0 && s < minUnheardIntervals*iv:
		return fmt.Errorf("unheard_limit_s: %d is under %d heartbeat intervals (%d s); 0 means never", s, minUnheardIntervals, minUnheardIntervals*iv)
	}
	return nil
}
