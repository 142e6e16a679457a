package rayhead

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// Files are what `head ray-head-cert` writes: the Ray head's TLS files and
// the cluster token file.
type Files struct{ CA, Cert, Key, Token string }

// InstanceID is the head's RAY_CLOUD_INSTANCE_ID: Ray's v2 autoscaler links
// a Ray node to a provider node only through it, and the autoscaler plugin
// lists the head under this ID (nodes carry their candidate ID).
const InstanceID = "head"

// NodeTypeName is the head's RAY_NODE_TYPE_NAME and the plugin's head node type.
const NodeTypeName = "head"

// Command is the Ray head's argv (docs/protocol.md §8 head up): python -m
// ray.scripts.scripts, the way the agent starts the nodes' Ray, with a
// temp dir of its own (TempDir) when tempDir is set.
func Command(python, address, tempDir string) []string {
	host, port, _ := net.SplitHostPort(address)
	argv := []string{python, "-m", "ray.scripts.scripts", "start", "--head", "--block",
		"--node-ip-address=" + host, "--port=" + port, "--disable-usage-stats"}
	if tempDir != "" {
		argv = append(argv, "--temp-dir="+tempDir)
	}
	return argv
}

// Env is base with the Ray head's TLS, token and instance variables set
// (replacing any of them base already has), the same TLS and token setup
// the nodes' Ray gets, and python's dir first on PATH: the jobs the Ray
// head starts (`ray job submit -- python3 job.py`) find the cluster's
// Python, the one with Ray, and not whatever python3 comes first.
func Env(base []string, f Files, python string) []string {
	return withVars(base, append(tlsVars(f),
		"RAY_CLOUD_INSTANCE_ID="+InstanceID,
		"RAY_NODE_TYPE_NAME="+NodeTypeName,
		"PATH="+pathWith(base, python)))
}

// ClientEnv is base set up for a driver or `ray job submit` on the head's
// machine: the Ray head's address, its job API (Ray's dashboard, on
// 127.0.0.1 only), the cluster's TLS files and token file (never the
// token's value), and python's dir first on PATH.
func ClientEnv(base []string, f Files, address, dashboard, python string) []string {
	return withVars(base, append(tlsVars(f),
		"RAY_ADDRESS="+address,
		"RAY_API_SERVER_ADDRESS=http://"+dashboard,
		"RAY_USAGE_STATS_ENABLED=0",
		"PATH="+pathWith(base, python)))
}

// Dashboard is where a Ray head serves its dashboard and job API by
// default: Ray's default port, on loopback only.
const Dashboard = "127.0.0.1:8265"

// tlsVars are the TLS and token settings every Ray process of the cluster
// gets. RAY_AUTH_TOKEN stays unset: the token reaches Ray as a file.
func tlsVars(f Files) []string {
	return []string{
		"RAY_USE_TLS=1",
		"RAY_TLS_SERVER_CERT=" + f.Cert,
		"RAY_TLS_SERVER_KEY=" + f.Key,
		"RAY_TLS_CA_CERT=" + f.CA,
		"RAY_AUTH_MODE=token",
		"RAY_AUTH_TOKEN_PATH=" + f.Token,
	}
}

// withVars is base without any variable vars names (and without
// RAY_AUTH_TOKEN, which would put a token value in the env), then vars.
func withVars(base, vars []string) []string {
	set := map[string]bool{"RAY_AUTH_TOKEN": true}
	for _, kv := range vars {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(base)+len(vars))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, vars...)
}

// pathWith is base's PATH (or the usual one) with python's dir in front
// when python names a dir.
func pathWith(base []string, python string) string {
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range base {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	if dir := filepath.Dir(python); strings.Contains(python, "/") && dir != "" {
		return dir + ":" + path
	}
	return path
}

// WithAutoscaler is argv with Ray's autoscaler turned on: the monitor the
// Ray head runs reads the cluster config at path (STATE/autoscaler.yaml)
// and loads the plugin it names from the Ray head's PYTHONPATH.
func WithAutoscaler(argv []string, path string) []string {
	return append(append([]string(nil), argv...), "--autoscaling-config="+path)
}

// WithPythonPath is env with dir first on PYTHONPATH, the rest kept after
// it (the stand-in Ray of the tests is found there too).
func WithPythonPath(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	val := dir
	for _, kv := range env {
		if rest, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			if rest != "" {
				val = dir + ":" + rest
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PYTHONPATH="+val)
}

// HeartbeatTimeoutS is the AUTOSCALER_HEARTBEAT_TIMEOUT_S the Ray head
// gets with the autoscaler on, unless head up's environment names one.
// Ray's v1 autoscaler ends a node that has not reported to Ray this long
// after the plugin first calls it up-to-date (enrolled); Ray's 30 s default
// ended nodes whose Ray was still starting on a loaded machine, and Ray
// launched new ones, over and over. A node whose Ray dies is ended by the
// head anyway (the agent's crash-loop report, lost heartbeats).
const HeartbeatTimeoutS = "300"

// AutoscalerEnv is env for a Ray head running the autoscaler: the plugin's
// dir first on PYTHONPATH and AUTOSCALER_HEARTBEAT_TIMEOUT_S defaulted.
func AutoscalerEnv(env []string, pluginDir string) []string {
	env = WithPythonPath(env, pluginDir)
	for _, kv := range env {
		if strings.HasPrefix(kv, "AUTOSCALER_HEARTBEAT_TIMEOUT_S=") {
			return env
		}
	}
	return append(env, "AUTOSCALER_HEARTBEAT_TIMEOUT_S="+HeartbeatTimeoutS)
}

// WithResources is argv with what the Ray head offers the cluster's work:
// res's CPU and GPU (0 each when res names none: Ray's advice for a head
// node, so tasks run on the rented nodes) and its custom resources.
func WithResources(argv []string, res map[string]float64) []string {
	out := append([]string(nil), argv...)
	out = append(out, "--num-cpus="+strconv.FormatFloat(res["CPU"], 'f', -1, 64),
		"--num-gpus="+strconv.FormatFloat(res["GPU"], 'f', -1, 64))
	custom := map[string]float64{}
	for k, v := range res {
		if k != "CPU" && k != "GPU" {
			custom[k] = v
		}
	}
	if len(custom) > 0 {
		b, _ := json.Marshal(custom) // sorted keys
		out = append(out, "--resources="+string(b))
	}
	return out
}
