package envconfig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Reexec replaces the process image with a fresh copy of itself
// (/proc/self/exe: same PID, same argv, the current environment, which no
// longer holds the secrets, nor any variable whose value holds one) and hands s to it through an inherited pipe,
// never argv or env. It returns only on failure, and then the process goes
// on as before.
//
// Why: os.Unsetenv edits Go's copy of the environment only. The kernel
// keeps showing the block the process was exec'd with at /proc/PID/environ,
// and every process of the same uid may read it: in a rented container that
// is Ray and every Ray worker, which would read CONTAINER_API_KEY (and the
// join token) there. A new exec gets a new block.
func Reexec(s Secrets, argv []string) error {
	payload, err := encodeHandover(s)
	if err != nil {
		return fmt.Errorf("reexec: %w", err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("reexec: pipe: %w", err)
	}
	r, w := p[0], p[1]
	// The payload is under a page, so this write completes with nobody
	// reading yet; the new image reads it to EOF.
	n, err := unix.Write(w, payload)
	unix.Close(w)
	if err == nil && n != len(payload) {
		err = io.ErrShortWrite
	}
	if err == nil {
		// A copy at 3 or above without close-on-exec: it survives the exec,
		// and is never stdio (fd 0 is free when we were started without it).
		var kept int
		if kept, err = unix.FcntlInt(uintptr(r), unix.F_DUPFD, 3); err == nil {
			unix.Close(r)
			r = kept
		}
	}
	if err != nil {
		unix.Close(r)
		return fmt.Errorf("reexec: pipe: %w", err)
	}
	env := append(withoutCopies(os.Environ(), s), EnvSecretsFD+"="+strconv.Itoa(r))
	err = unix.Exec("/proc/self/exe", argv, env)
	unix.Close(r)
	return fmt.Errorf("reexec /proc/self/exe: %w", err)
}

// readHandover reads the secrets Reexec wrote into the pipe at fd, then
// closes it. Only a pipe is accepted, and at most maxHandover bytes.
func readHandover(fdText string, s Secrets) error {
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 3 {
		return fmt.Errorf("%s=%q: not an inherited descriptor", EnvSecretsFD, fdText)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return fmt.Errorf("%s=%d: not a pipe", EnvSecretsFD, fd)
	}
	unix.CloseOnExec(fd) // Ray must not inherit it, even at EOF
	f := os.NewFile(uintptr(fd), "secrets")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHandover+1))
	if err != nil {
		return err
	}
	if len(b) > maxHandover {
		return errors.New("over the size limit")
	}
	return decodeHandover(b, s)
}

// Undumpable makes the process non-dumpable (prctl PR_SET_DUMPABLE 0): a
// process of the same uid without CAP_SYS_PTRACE, such as a Ray worker, can
// then neither ptrace the agent nor open its /proc/PID/mem or environ. The
// agent holds CONTAINER_API_KEY and the app root key in memory for as long
// as it runs. Ray itself is not affected: execve makes it dumpable again.
// Call it after Reexec, which resets the flag.
func Undumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return nil
}
