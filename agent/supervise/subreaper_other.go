//go:build !linux

package supervise

import "errors"

// becomeSubreaper exists only on Linux; the agent runs nowhere else.
func becomeSubreaper() error {
	return errors.New("child subreaper: only on linux")
}
