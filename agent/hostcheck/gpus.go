package hostcheck

import (
	"os"
	"regexp"
)

var nvidiaDevRe = regexp.MustCompile(`^nvidia[0-9]+$`)

// countGPUs counts the NVIDIA GPUs the container can see: the entries of
// ROOT/proc/driver/nvidia/gpus (one per GPU, by PCI address), else the
// ROOT/dev/nvidiaN device nodes (not nvidiactl, nvidia-uvm, …). It is
// reported, not judged: the head compares it with the node type.
// NVIDIA_VISIBLE_DEVICES is never read: the host sets it.
func countGPUs(cfg Config) int {
	if entries, err := os.ReadDir(cfg.path("/proc/driver/nvidia/gpus")); err == nil && len(entries) > 0 {
		return len(entries)
	}
	entries, err := os.ReadDir(cfg.path("/dev"))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if nvidiaDevRe.MatchString(e.Name()) {
			n++
		}
	}
	return n
}
