package raylife

import (
	"github.com/rayvast/rayvast/agent/envconfig"
	"github.com/rayvast/rayvast/agent/supervise"
)

// Policy is the environment's restart knobs over the defaults.
func Policy(k envconfig.Restart) supervise.RestartPolicy {
	p := supervise.DefaultRestartPolicy()
	if k.MaxRestarts >= 0 {
		p.MaxRestarts = k.MaxRestarts
	}
	if k.Window > 0 {
		p.Window = k.Window
	}
	if k.Delay > 0 {
		p.Delay = k.Delay
	}
	return p
}
