package server

import (
	"time"

	"github.com/rayvast/rayvast/head/provider"
)

// loopTiming is a provider whose rentals want the reconcile loop's sweep
// more often than the default, or replaced before a contract's end (vast:
// interruptible node types, end dates).
type loopTiming interface {
	SweepEvery() time.Duration
	ReplaceBefore() time.Duration
}

// timing reads the provider's wishes; zeros (the loop's defaults: a sweep
// every 30 s, no replacement ahead) for a provider without any.
func timing(p provider.Provider) (sweep, replaceBefore time.Duration) {
	if t, ok := p.(loopTiming); ok {
		return t.SweepEvery(), t.ReplaceBefore()
	}
	return 0, 0
}
