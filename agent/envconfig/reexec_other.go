//go:build !linux

package envconfig

import "errors"

// Reexec is Linux-only (it needs /proc/self/exe); elsewhere the secrets
// stay in the initial environment block.
func Reexec(s Secrets, argv []string) error {
	return errors.New("reexec: only on linux")
}

func readHandover(fdText string, s Secrets) error {
	return errors.New("secret handover: only on linux")
}

// Undumpable does nothing off Linux.
func Undumpable() error { return nil }
