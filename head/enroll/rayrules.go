package enroll

import (
	"strings"

	"github.com/rayvast/rayvast/internal/wire"
)

// gpuModelMatches is step 5's model rule: every reported model contains
// the configured one, both normalised (case, spaces, '-', '_' and a
// leading "NVIDIA" ignored), so "A100" and "a100-sxm4" match "NVIDIA
// A100-SXM4-80GB" and "A10" matches it too: name the model as precisely
// as the offers need. One model per GPU is required: a GPU the agent
// could not name cannot be verified.
func gpuModelMatches(want string, reported []string, gpus int) bool {
	w := wire.NormGPUModel(want)
	if w == "" {
		return true
	}
	if len(reported) != gpus {
		return false
	}
	for _, r := range reported {
		if !strings.Contains(wire.NormGPUModel(r), w) {
			return false
		}
	}
	return true
}
