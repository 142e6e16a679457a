package enroll

import (
	"fmt"
	"strconv"
	"strings"
)

// MinRayVersion is the oldest Ray a node may run: RAY_AUTH_MODE=token and
// RAY_AUTH_TOKEN_PATH exist from 2.52 on, and older Ray ignores both
// silently, so its node would join the cluster without token auth.
var MinRayVersion = [2]int{2, 52}

// gpuModelMatches is step 5's model rule: every reported model contains
// the configured one, both normalised (case, spaces, '-', '_' and a
// leading "NVIDIA" ignored), so "A100" and "a100-sxm4" match "NVIDIA
// A100-SXM4-80GB" and "A10" matches it too: name the model as precisely
// as the offers need. One model per GPU is required: a GPU the agent
// could not name cannot be verified.
func gpuModelMatches(want string, reported []string, gpus int) bool {
	w := normGPU(want)
	if w == "" {
		return true
	}
	if len(reported) != gpus {
		return false
	}
	for _, r := range reported {
		if !strings.Contains(normGPU(r), w) {
			return false
		}
	}
	return true
}

// normGPU lowercases s, drops spaces, '-' and '_', then a leading "nvidia".
func normGPU(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '-', '_':
			return -1
		}
		return r
	}, strings.ToLower(s))
	return strings.TrimPrefix(s, "nvidia")
}

// rayVersionProblem is step 6a: "" when the node's Ray and Python fit the
// cluster, else why not (for the log and the operator).
func rayVersionProblem(rayGot, pyGot, rayWant, pyWant string) string {
	got, ok := releaseParts(rayGot)
	if !ok {
		return fmt.Sprintf("ray version %q unknown: the image's python cannot import ray", rayGot)
	}
	if len(got) < 2 || got[0] < MinRayVersion[0] || got[0] == MinRayVersion[0] && got[1] < MinRayVersion[1] {
		return fmt.Sprintf("ray %s is older than %d.%d (no token auth: the node would run unauthenticated)", rayGot, MinRayVersion[0], MinRayVersion[1])
	}
	if rayWant != "" && rayGot != rayWant {
		return fmt.Sprintf("ray %s is not the cluster's ray.version %s", rayGot, rayWant)
	}
	if pyWant == "" {
		return ""
	}
	want, _ := releaseParts(pyWant) // the config checked its shape
	have, ok := releaseParts(pyGot)
	if !ok || len(have) < len(want) {
		return fmt.Sprintf("python %q is not the cluster's ray.python_version %s", pyGot, pyWant)
	}
	for i := range want {
		if have[i] != want[i] {
			return fmt.Sprintf("python %s is not the cluster's ray.python_version %s", pyGot, pyWant)
		}
	}
	return ""
}

// releaseParts reads the leading dotted numbers of a version ("2.53.0rc1"
// → 2 53 0, "3.11.7+local" → 3 11 7); false when it starts with none.
func releaseParts(v string) ([]int, bool) {
	var parts []int
	for _, f := range strings.Split(v, ".") {
		end := 0
		for end < len(f) && f[end] >= '0' && f[end] <= '9' {
			end++
		}
		if end == 0 || end > 9 {
			break
		}
		n, _ := strconv.Atoi(f[:end])
		parts = append(parts, n)
		if end < len(f) { // "0rc1": a pre-release tail ends the release part
			break
		}
	}
	return parts, len(parts) > 0
}
