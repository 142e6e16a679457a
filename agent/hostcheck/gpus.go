package hostcheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// maxGPUModels bounds what is read and reported (the wire allows 64).
const maxGPUModels = 64

// gpuModels reads the Model: line of each
// ROOT/proc/driver/nvidia/gpus/*/information, in PCI address order (the
// directory names). A GPU whose file has no Model: line reports "": the
// head then judges it a mismatch wherever a model is required. Reported,
// not judged here.
func gpuModels(cfg Config) []string {
	dir := cfg.path("/proc/driver/nvidia/gpus")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return []string{}
	}
	models := []string{}
	for _, e := range entries { // ReadDir sorts by name
		if len(models) == maxGPUModels {
			break
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "information"))
		if err != nil {
			models = append(models, "")
			continue
		}
		models = append(models, ParseGPUModel(string(b)))
	}
	return models
}

// ParseGPUModel returns the value of the "Model:" line of an NVIDIA
// information file ("Model: \t\t NVIDIA A100-SXM4-80GB"), printable and at
// most 128 bytes (the wire's bound); "" when there is none. The guest API
// dashboard shows the model through it too, so both say the same.
func ParseGPUModel(info string) string {
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != "Model" {
			continue
		}
		v = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return ' '
			}
			return r
		}, v)
		v = strings.Join(strings.Fields(v), " ")
		for len(v) > 128 {
			v = v[:len(v)-1]
		}
		return strings.ToValidUTF8(v, "")
	}
	return ""
}
