package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/rayvast/rayvast/head/checkgate"
	"github.com/rayvast/rayvast/head/enroll"
	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/ctxsleep"
	"github.com/rayvast/rayvast/internal/portcheck"
)

// openState takes the state dir's lock (one head per dir, docs/protocol.md §8), removes
// temp files a killed head left, and opens the registry, refusing a store
// that vanished from a dir that has served. The caller calls done on exit.
func openState(st *statedir.State, log *slog.Logger) (reg *registry.Registry, done func(), err error) {
	lock, err := statedir.Lock(st.Dir)
	if err != nil {
		return nil, nil, err
	}
	if removed, err := statedir.CleanTemp(st.Dir); err != nil {
		log.Warn("clean state dir", "err", err)
	} else if len(removed) > 0 {
		log.Info("removed temp files a killed head left", "files", removed)
	}
	reg, err = registry.Open(registry.Config{Path: st.Path(statedir.Store), LegacyPath: st.Path(statedir.Registry),
		StoreID: st.StoreID, Log: log, Hook: crashHook(log)})
	if errors.Is(err, registry.ErrNoStore) {
		err = fmt.Errorf("%w\nthis state dir has served (%s names store %s), so its candidates and nodes are lost, not new: "+
			"starting empty would take the cluster's running rentals for strangers and destroy them. "+
			"Restore %s from a backup; or, if none of this cluster's rentals run any more, remove the \"store_id\" line from %s to start with no state",
			err, statedir.HeadInfo, st.StoreID, st.Path(statedir.Store), st.Path(statedir.HeadInfo))
	}
	if err != nil {
		lock.Unlock()
		return nil, nil, err
	}
	if st.StoreID == "" {
		if err := statedir.RecordStore(st.Dir, reg.StoreID()); err != nil {
			reg.Close()
			lock.Unlock()
			return nil, nil, err
		}
	}
	return reg, func() { reg.Close(); lock.Unlock() }, nil
}

// pruneEnded drops ended candidates older than retention, hourly, until ctx
// ends.
func pruneEnded(ctx context.Context, reg *registry.Registry, retention time.Duration, m *metrics.Metrics, log *slog.Logger) {
	if retention <= 0 {
		retention = registry.DefaultRetention // a caller that left it unset must not prune everything
	}
	prune := func() {
		n, err := reg.Prune(retention)
		if err != nil {
			log.Warn("prune ended candidates", "err", err)
		}
		m.Pruned(n)
	}
	prune()
	ctxsleep.Every(ctx, time.Hour, prune)
}

// CrashEnv names a registry hook point at which head serve kills itself
// with SIGKILL: the crash tests (crash_test.go) use it to stop a real head
// between two steps of an enrollment or a delete. Unset, it costs nothing.
const CrashEnv = "RAYVAST_TEST_CRASH_AT"

func crashHook(log *slog.Logger) func(string) {
	at := os.Getenv(CrashEnv)
	if at == "" {
		return nil
	}
	log.Warn("test crash point armed: this head kills itself there", "point", at)
	return func(point string) {
		if point == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
}

// maxPortChecks is the most port checks (step 7) running at once, however
// far the gate's limit grows. Each holds up to portcheck.DefaultConcurrency
// sockets: 512 × 16 = 8,192 descriptors at most, whatever the size of an
// enrollment storm (2,000 candidates at once would want 32,000, past a
// 20,000 limit).
const maxPortChecks = 512

// maxCheckWait is how long an enrollment waits for a port check turn before
// the head answers 503 busy and the agent retries: well inside the agent's
// 60 s enroll timeout, so the answer reaches it.
const maxCheckWait = 30 * time.Second

// gatedPortCheck is the real port check behind the adaptive gate
// (head/checkgate). The check's 10 s start when it gets its turn: a
// candidate must not fail its ports for waiting behind others.
func gatedPortCheck(g *checkgate.Gate, maxWait time.Duration) enroll.PortChecker {
	return func(ctx context.Context, ip string, ports []int, key []byte) error {
		wctx, wcancel := context.WithTimeout(ctx, maxWait)
		release, err := g.Acquire(wctx)
		wcancel()
		if err != nil {
			return fmt.Errorf("%w: no turn in %v: %v", enroll.ErrBusy, maxWait, err)
		}
		defer release()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), enroll.CheckTimeout)
		defer cancel()
		return portcheck.Check(cctx, portcheck.CheckConfig{}, ip, ports, key)
	}
}
