//go:build !linux

package raylaunch

// liveAffinity: no sched_getaffinity here; the cgroup files decide.
func liveAffinity() int { return 0 }
