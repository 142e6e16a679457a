package supervise

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the agent passes on to the child's group. All
// three end Ray, so the first one also starts the grace clock.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// setGroup puts the child in a new process group so that one kill(-pgid)
// reaches Ray and every worker it starts, and so that a terminal's Ctrl-C
// reaches the agent first.
func setGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	a := cmd.SysProcAttr
	// A session leader is already its group's leader, and setpgid on it
	// fails with EPERM.
	if !a.Setsid {
		a.Setpgid = true
		a.Pgid = 0
	}
	setDeathSignal(a)
}

// signalGroup sends sig to every process in group pgid. A group that is
// already gone is not an error: that is the goal.
func signalGroup(pgid int, sig syscall.Signal) error {
	err := unix.Kill(-pgid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// groupEmpty tells whether any process (zombies included) is still in pgid.
func groupEmpty(pgid int) bool {
	return errors.Is(unix.Kill(-pgid, 0), unix.ESRCH)
}
