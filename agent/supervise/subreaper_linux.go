package supervise

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes orphaned descendants re-parent to us instead of to
// PID 1, so that when the agent is not PID 1 (docker --init, tests) Ray's
// double-forked workers are still ours to reap and to find.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_CHILD_SUBREAPER: %w", err)
	}
	return nil
}

// setDeathSignal has the kernel SIGKILL the child if the agent dies first:
// as PID 1 the namespace dies with us anyway, but not as PID 1 (docker
// --init, tests) Ray would outlive us. A caller's own choice is kept.
func setDeathSignal(a *syscall.SysProcAttr) {
	if a.Pdeathsig == 0 {
		a.Pdeathsig = syscall.SIGKILL
	}
}
