package config

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/rayvast/rayvast/head/rayversion"
	"github.com/rayvast/rayvast/internal/wire"
)

// Ray's own rules, checked at config time so a node type Ray would refuse
// fails `head serve` with exit 2 instead of every rental's `ray start`.
// Sources (ray-project/ray master): resources in
// python/ray/_private/resource_and_label_spec.py and parameter.py, labels
// in python/ray/_private/label_utils.py.
var (
	// rayVersionRe: a full release ("2.53.0") with an optional
	// pre-release or local tail; nodes must report exactly this string.
	rayVersionRe = regexp.MustCompile(`^[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,4}([.+-]?[0-9A-Za-z][0-9A-Za-z.+-]{0,31})?$`)
	// pythonVersionRe: 1 to 3 parts, compared part by part ("3.11").
	pythonVersionRe = regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,4}){0,2}$`)
	labelNameRe     = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,61}[a-zA-Z0-9])?$`)
	labelPrefixRe   = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,61}[a-zA-Z0-9])?)*$`)
)

// rayOwnResources are Ray's default resources: `ray start --resources`
// refuses them (their own flags set them).
var rayOwnResources = map[string]bool{"CPU": true, "GPU": true, "memory": true, "object_store_memory": true}

// maxResource is Ray's MAX_RESOURCE_QUANTITY (ray_constants.py).
const maxResource = 100e12

// maxCPUs: every Ray worker and driver takes one worker port (57 of a
// candidate's 64), and 4 stay for drivers and actors.
const maxCPUs = wire.PortCount - 7 - 4

func validateRay(r wire.RayHead) error {
	if v := r.Version; v != "" {
		if !rayVersionRe.MatchString(v) {
			return fmt.Errorf("ray.version %q: want a Ray release like 2.53.0 (nodes must report exactly it)", v)
		}
		if !rayversion.AtFloor(v) {
			return fmt.Errorf("ray.version %s: older than %s, which has no token auth; no node could join", v, rayversion.Floor)
		}
	}
	if v := r.PythonVersion; v != "" && !pythonVersionRe.MatchString(v) {
		return fmt.Errorf("ray.python_version %q: want 1 to 3 numeric parts like 3.11 or 3.11.7", v)
	}
	for _, k := range slices.Sorted(maps.Keys(r.HeadResources)) {
		v := r.HeadResources[k]
		switch {
		case k == "memory" || k == "object_store_memory":
			return fmt.Errorf("ray.head_resources.%s: not settable here (Ray sizes it); want CPU, GPU or a custom resource", k)
		case k == "" || strings.ContainsAny(k, " \t\n\",={}"):
			return fmt.Errorf("ray.head_resources: resource name %q", k)
		case v < 0 || v != math.Trunc(v):
			return fmt.Errorf("ray.head_resources.%s: %v: want a whole number, 0 or more", k, v)
		case v > maxResource:
			return fmt.Errorf("ray.head_resources.%s: above Ray's maximum %g", k, maxResource)
		}
	}
	return nil
}

func validateNodeTypeRay(n string, t wire.NodeType) error {
	if t.CPUs < 0 || t.CPUs > maxCPUs {
		return fmt.Errorf("node_types.%s.cpus: want 0 (the default, %d) to %d: every Ray worker takes one of the %d worker ports", n, maxCPUs, maxCPUs, maxCPUs+4)
	}
	if t.GPUModel != "" {
		if err := validateGPUModel(t); err != nil {
			return fmt.Errorf("node_types.%s.gpu_model: %w", n, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Resources)) {
		v := t.Resources[k]
		switch {
		case rayOwnResources[k]:
			return fmt.Errorf("node_types.%s.resources.%s: one of Ray's own resources; set gpus or cpus instead", n, k)
		case v != math.Trunc(v):
			return fmt.Errorf("node_types.%s.resources.%s: %v is not a whole number (Ray refuses fractional node resources)", n, k, v)
		case v > maxResource:
			return fmt.Errorf("node_types.%s.resources.%s: above Ray's maximum %g", n, k, maxResource)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Labels)) {
		if err := validateLabel(k, t.Labels[k]); err != nil {
			return fmt.Errorf("node_types.%s.labels: %w", n, err)
		}
	}
	return nil
}

func validateGPUModel(t wire.NodeType) error {
	if t.GPUs == 0 {
		return fmt.Errorf("set, but gpus is 0")
	}
	if len(t.GPUModel) > 128 {
		return fmt.Errorf("longer than 128 bytes")
	}
	for _, r := range t.GPUModel {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("control character")
		}
	}
	norm := wire.NormGPUModel(t.GPUModel)
	if norm == "" {
		return fmt.Errorf("%q names no model (case, spaces, '-', '_' and a leading NVIDIA are ignored)", t.GPUModel)
	}
	return nil
}

// validateLabel is Ray's label syntax (Kubernetes'): an optional DNS
// prefix and "/", a name of 1-63 alphanumerics with "-_." inside, a value
// of the same shape or empty; the "ray.io/" prefix is Ray's own.
func validateLabel(k, v string) error {
	if strings.HasPrefix(k, "ray.io/") {
		return fmt.Errorf("key %q: the ray.io/ prefix is reserved for Ray's own labels", k)
	}
	name := k
	if prefix, rest, ok := strings.Cut(k, "/"); ok {
		if len(prefix) > 253 || !labelPrefixRe.MatchString(prefix) {
			return fmt.Errorf("key %q: the prefix must be DNS labels separated by dots", k)
		}
		name = rest
	}
	if !labelNameRe.MatchString(name) {
		return fmt.Errorf("key %q: want 1-63 of [A-Za-z0-9], with -_. inside", k)
	}
	if v != "" && !labelNameRe.MatchString(v) {
		return fmt.Errorf("value of %q: want empty or 1-63 of [A-Za-z0-9], with -_. inside", k)
	}
	return nil
}
