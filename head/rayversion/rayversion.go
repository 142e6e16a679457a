// Package rayversion owns the head's Ray and Python version rules, read
// twice: by the config (ray.version may not be under the floor) and by
// enrollment (docs/protocol.md §6 step 6a judges what a node reports).
package rayversion

import (
	"fmt"
	"strconv"
	"strings"
)

// Floor is the oldest Ray a node may run: RAY_AUTH_MODE=token and
// RAY_AUTH_TOKEN_PATH exist from 2.52 on, and older Ray ignores both
// silently, so its node would join the cluster without token auth.
const Floor = "2.52"

var floor, _ = Parts(Floor)

// Parts reads the leading dotted numbers of a version ("2.53.0rc1" →
// 2 53 0, "3.11.7+local" → 3 11 7); false when it starts with none.
func Parts(v string) ([]int, bool) {
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

// AtFloor reports whether the Ray version v is Floor or newer; a version
// without a minor part is not.
func AtFloor(v string) bool {
	got, _ := Parts(v)
	if len(got) < len(floor) {
		return false
	}
	for i := range floor {
		if got[i] != floor[i] {
			return got[i] > floor[i]
		}
	}
	return true
}

// PythonMatches reports whether the Python version got has every part of
// want ("3.11" accepts 3.11.x; numbers, not prefixes: 3.1 is not 3.11).
func PythonMatches(got, want string) bool {
	w, _ := Parts(want)
	g, ok := Parts(got)
	if !ok || len(g) < len(w) {
		return false
	}
	for i := range w {
		if g[i] != w[i] {
			return false
		}
	}
	return true
}

// Problem is docs/protocol.md §6 step 6a, the rule enrollment applies to what a node
// reports (and `head image-check` to what an image reports): "" when the
// node's Ray and Python fit the cluster, else why not (for the log and the
// operator). rayWant and pyWant are the config's ray.version and
// ray.python_version ("" = any).
func Problem(rayGot, pyGot, rayWant, pyWant string) string {
	if _, ok := Parts(rayGot); !ok {
		return fmt.Sprintf("ray version %q unknown: the image's python cannot import ray", rayGot)
	}
	if !AtFloor(rayGot) {
		return fmt.Sprintf("ray %s is older than %s (no token auth: the node would run unauthenticated)", rayGot, Floor)
	}
	if rayWant != "" && rayGot != rayWant {
		return fmt.Sprintf("ray %s is not the cluster's ray.version %s", rayGot, rayWant)
	}
	if pyWant != "" && !PythonMatches(pyGot, pyWant) {
		return fmt.Sprintf("python %q is not the cluster's ray.python_version %s", pyGot, pyWant)
	}
	return ""
}
