package enroll

import (
	"fmt"
	"strings"

	"github.com/rayvast/rayvast/head/rayversion"
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

// rayVersionProblem is step 6a: "" when the node's Ray and Python fit the
// cluster, else why not (for the log and the operator).
func rayVersionProblem(rayGot, pyGot, rayWant, pyWant string) string {
	if _, ok := rayversion.Parts(rayGot); !ok {
		return fmt.Sprintf("ray version %q unknown: the image's python cannot import ray", rayGot)
	}
	if !rayversion.AtFloor(rayGot) {
		return fmt.Sprintf("ray %s is older than %s (no token auth: the node would run unauthenticated)", rayGot, rayversion.Floor)
	}
	if rayWant != "" && rayGot != rayWant {
		return fmt.Sprintf("ray %s is not the cluster's ray.version %s", rayGot, rayWant)
	}
	if pyWant != "" && !rayversion.PythonMatches(pyGot, pyWant) {
		return fmt.Sprintf("python %q is not the cluster's ray.python_version %s", pyGot, pyWant)
	}
	return ""
}
