//go:build !linux

package supervise

import (
	"errors"
	"syscall"
)

// becomeSubreaper exists only on Linux; the agent runs nowhere else.
func becomeSubreaper() error {
	return errors.New("child subreaper: only on linux")
}

func setDeathSignal(*syscall.SysProcAttr) {}
