package supervise

import (
	"golang.org/x/sys/unix"
)

// reapAll collects every child that has exited, calling fn for each. One
// SIGCHLD may stand for many exits (pending signals coalesce), so it loops
// until wait4 says no one else is waiting (0) or we have no children (ECHILD).
func reapAll(fn func(pid int, ws unix.WaitStatus)) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		fn(pid, ws)
	}
}

// exitCode is what a shell would report: the exit status, or 128+signal.
func exitCode(ws unix.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return -1 // stopped/continued: not asked for (no WUNTRACED), never seen
}
