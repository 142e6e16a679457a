package main

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// cpus says where each side of a run may run. With --pin the head (and the
// bare server, measured in its place) get CPU 0 alone and the simulated
// nodes every other CPU: the head then competes only with itself, as on its
// own machine, and the nodes' TLS handshakes and port-check answers (which
// on a real fleet run on 1,000 other machines) do not take its CPU. Without
// --pin everything shares every CPU.
type cpus struct {
	server, nodes *unix.CPUSet // nil: no pinning
}

func newCPUs(pin bool) (cpus, error) {
	if !pin {
		return cpus{}, nil
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return cpus{}, err
	}
	var ids []int
	for i := range 1024 {
		if all.IsSet(i) {
			ids = append(ids, i)
		}
	}
	if len(ids) < 2 {
		return cpus{}, fmt.Errorf("--pin needs 2 CPUs, this process may use %d", len(ids))
	}
	var server, nodes unix.CPUSet
	server.Set(ids[0])
	for _, id := range ids[1:] {
		nodes.Set(id)
	}
	return cpus{server: &server, nodes: &nodes}, nil
}

func (c cpus) String() string {
	if c.server == nil {
		return "no pinning: head, bare server and nodes share every CPU"
	}
	return fmt.Sprintf("head and bare server pinned to %d CPU, nodes to %d others", c.server.Count(), c.nodes.Count())
}

// start starts cmd with the CPU affinity set (nil: as this process). A
// child inherits the affinity of the thread that forks it, so the fork
// happens on a locked thread given that mask. That thread must outlive the
// child: Pdeathsig fires when the forking thread exits, not the process.
// So its goroutine never returns (a parked thread per child, for a tool
// that runs a few dozen).
func start(cmd *exec.Cmd, set *unix.CPUSet) error {
	if set == nil {
		return cmd.Start()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.SchedSetaffinity(0, set); err != nil {
			done <- fmt.Errorf("pin: %w", err)
			return
		}
		done <- cmd.Start()
		select {}
	}()
	return <-done
}
