package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// inNetnsEnv marks the loadtest re-run inside its own network namespace.
const inNetnsEnv = "RAYVAST_LOADTEST_IN_NETNS"

// reexecInNetns runs this same command line again in a new network
// namespace that holds only its own loopback, and returns its exit code.
// Every process of the run (head, workers, bare server) lives there, so:
//   - the host's firewall and connection tracking are not on the path: on
//     a host with Docker every loopback connection is tracked, 64 per
//     enrollment stay in the table for 120 s in TIME_WAIT, and a few runs
//     fill nf_conntrack_max (262,144 here) so that new connections are
//     dropped and port checks fail for the machine's reasons, not the
//     head's (what a real head's operator must size: see docs/operations.md);
//   - 127.0.0.0/8 traffic of the run never meets the host's services.
func reexecInNetns() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 1, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Env = append(os.Environ(), inNetnsEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), nil
		}
		return 1, fmt.Errorf("run in a new network namespace: %w", err)
	}
	return 0, nil
}

// loopbackUp brings up lo in the current (new) network namespace, which
// also gives it the local route for 127.0.0.0/8.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}
