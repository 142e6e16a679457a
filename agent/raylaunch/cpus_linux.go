package raylaunch

import "golang.org/x/sys/unix"

// liveAffinity counts the CPUs this process may run on; 0 if unknown.
func liveAffinity() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0
	}
	return set.Count()
}
