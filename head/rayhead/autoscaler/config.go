package autoscaler

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/atomicfile"
)

// File is the Ray cluster config head up writes into the state
// dir for `ray start --head --autoscaling-config=…` or `ray up`.
const File = "autoscaler.yaml"

// PluginDir is the state dir's folder holding the autoscaler plugin that
// head up puts on the Ray head's PYTHONPATH.
const PluginDir = "autoscaler"

// defaultIdleTimeoutMinutes is Ray's idle_timeout_minutes when the
// config's autoscaler block does not name one.
const defaultIdleTimeoutMinutes = 5.0

// ClusterConfig is the Ray cluster config of this cluster for the
// rayvast plugin (this package). Every key Ray's v1 StandardAutoscaler
// indexes directly is present (it reads the YAML raw), the head has a node
// type (v2 validates that), no node is ever reached by SSH
// (disable_node_updaters) and a monitor restart does not end every node as
// outdated (disable_launch_config_check). TestClusterConfigPassesRaySchema validates
// the result against Ray's ray-schema.json.
func ClusterConfig(cluster, sock, headIP string, cfg *config.Config) map[string]any {
	types := map[string]any{
		rayhead.NodeTypeName: map[string]any{"node_config": map[string]any{}, "resources": map[string]int{},
			"min_workers": 0, "max_workers": 0},
	}
	total := 0
	names := make([]string, 0, len(cfg.NodeTypes))
	for n := range cfg.NodeTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := cfg.NodeTypes[n]
		res := map[string]int{}
		for k, v := range t.Resources {
			res[k] = int(v) // Ray's schema: integers (config validation refuses others)
		}
		if t.GPUs > 0 {
			res["GPU"] = t.GPUs
		}
		if t.CPUs > 0 {
			res["CPU"] = t.CPUs
		}
		labels := map[string]string{}
		for k, v := range t.Labels {
			labels[k] = v
		}
		types[n] = map[string]any{"node_config": map[string]any{}, "resources": res, "labels": labels,
			"min_workers": t.MinWorkers, "max_workers": t.MaxWorkers}
		total += t.MaxWorkers
	}
	idle := defaultIdleTimeoutMinutes
	if a := cfg.Autoscaler; a != nil && a.IdleTimeoutMinutes > 0 {
		idle = a.IdleTimeoutMinutes
	}
	return map[string]any{
		"cluster_name":         cluster,
		"max_workers":          total,
		"upscaling_speed":      1.0,
		"idle_timeout_minutes": idle,
		"provider": map[string]any{
			"type": "external", "module": "rayvast_autoscaler.RayvastNodeProvider",
			"admin_socket": sock, "head_ip": headIP,
			"disable_node_updaters": true, "disable_launch_config_check": true,
		},
		"auth":                          map[string]any{"ssh_user": "root"}, // indexed by v1; no SSH is used
		"available_node_types":          types,
		"head_node_type":                rayhead.NodeTypeName,
		"file_mounts":                   map[string]any{},
		"cluster_synced_files":          []string{},
		"file_mounts_sync_continuously": false,
		"rsync_exclude":                 []string{},
		"rsync_filter":                  []string{},
		"initialization_commands":       []string{},
		"setup_commands":                []string{},
		"head_setup_commands":           []string{},
		"worker_setup_commands":         []string{},
		"head_start_ray_commands":       []string{},
		"worker_start_ray_commands":     []string{},
	}
}

// WriteConfig writes STATE/autoscaler.yaml (JSON is YAML: Ray's
// yaml.safe_load reads it) and returns its path.
func WriteConfig(st *statedir.State, cfg *config.Config, sock string) (string, error) {
	cluster := cfg.Cluster
	if cluster == "" {
		cluster = st.Cluster
	}
	b, err := json.MarshalIndent(ClusterConfig(cluster, sock, st.HeadIP, cfg), "", "  ")
	if err != nil {
		return "", err
	}
	head := "# Ray cluster config of rayvast cluster " + cluster + ", written by head up.\n" +
		"# Put head/rayhead/autoscaler on the Ray head's PYTHONPATH; see head/rayhead/autoscaler/example.yaml.\n"
	path := st.Path(File)
	// Atomic: Ray's monitor reads the file again on every update.
	if err := atomicfile.Write(path, append([]byte(head), append(b, '\n')...), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// writePlugin writes the autoscaler plugin built into head to
// STATE/autoscaler/rayvast_autoscaler.py and returns its dir.
func writePlugin(st *statedir.State) (string, error) {
	dir := st.Path(PluginDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("plugin dir: %w", err)
	}
	path := filepath.Join(dir, PluginModule+".py")
	if err := atomicfile.Write(path, Plugin, 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return dir, nil
}

// Files is what the Ray head needs to run Ray's autoscaler: the cluster
// config's path and the plugin's dir.
type Files struct{ Config, PluginDir string }

// Write writes STATE/autoscaler.yaml (naming the admin socket the head is
// about to open) and the plugin.
func Write(st *statedir.State, cfg *config.Config) (Files, error) {
	path, err := WriteConfig(st, cfg, st.Path(statedir.AdminSocket))
	if err != nil {
		return Files{}, err
	}
	dir, err := writePlugin(st)
	if err != nil {
		return Files{}, err
	}
	return Files{Config: path, PluginDir: dir}, nil
}

// UnplannedTypes are the node types Ray's autoscaler cannot plan CPU work
// for: with no cpus in the config, autoscaler.yaml declares no CPU for
// them, and Ray launches a type only for demand that fits what it
// declares (it learns the real CPU count once one of its nodes runs).
func UnplannedTypes(cfg *config.Config) []string {
	var out []string
	for n, t := range cfg.NodeTypes {
		if t.CPUs == 0 {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
