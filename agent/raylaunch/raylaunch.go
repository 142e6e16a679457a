// Package raylaunch builds Ray's command line and environment exactly as
// docs/protocol.md §9 says. It is a pure function of its inputs, so every rule about
// what reaches Ray (and what never does) is table-tested.
package raylaunch

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// Params is everything Ray's start depends on.
type Params struct {
	Python string         // $RAYVAST_PYTHON
	Ray    wire.RayParams // from the enroll answer
	// NumCPUs is what --num-cpus gets: the smaller of Ray.NumCPUs and the
	// CPUs the container may use (NumCPUs). TempDir is Ray's --temp-dir
	// (TempDir makes it).
	NumCPUs int
	TempDir string
	// CandidateID and NodeType are the bundle's: Ray's node identity for
	// the autoscaler (RAY_CLOUD_INSTANCE_ID, RAY_NODE_TYPE_NAME).
	CandidateID, NodeType string
	// Files of the written bundle.
	NodeCert, NodeKey, CACert, ClusterTokenPath string
	ShimDir                                     string // "" = no shim
	// MeshAddr is the agent's loopback address for the shim's mesh
	// questions (NAT_SHIM_MESH); "" = no mesh.
	MeshAddr string
	// Iface is the interface holding the container's address ("" unknown):
	// training libraries are told to advertise it (training.go).
	Iface string
	// Env is the agent's environment (os.Environ()), Secrets every secret
	// value the agent knows: no variable carrying one reaches Ray.
	Env     []string
	Secrets []string
}

// MeshEnv names the agent's mesh address for the shim's native layer.
// Not RAYVAST_*: Ray's environment carries none of those (docs/protocol.md §9).
const MeshEnv = "NAT_SHIM_MESH"

// Command returns Ray's argv (argv[0] is the Python) and environment.
func Command(p Params) (argv, env []string) {
	r := p.Ray
	resources := "{}"
	if len(r.Resources) > 0 {
		resources = mustJSON(r.Resources)
	}
	workers := make([]string, len(r.WorkerPorts))
	for i, w := range r.WorkerPorts {
		workers[i] = strconv.Itoa(w)
	}
	argv = []string{p.Python, "-m", "ray.scripts.scripts", "start", "--block",
		"--address=" + r.HeadAddress,
		"--node-ip-address=" + r.NodeIPAddress,
		fmt.Sprintf("--node-manager-port=%d", r.NodeManagerPort),
		fmt.Sprintf("--object-manager-port=%d", r.ObjectManagerPort),
		fmt.Sprintf("--runtime-env-agent-port=%d", r.RuntimeEnvAgentPort),
		fmt.Sprintf("--dashboard-agent-grpc-port=%d", r.DashboardAgentGRPCPort),
		fmt.Sprintf("--dashboard-agent-listen-port=%d", r.DashboardAgentListenPort),
		fmt.Sprintf("--metrics-export-port=%d", r.MetricsExportPort),
		"--worker-port-list=" + strings.Join(workers, ","),
		fmt.Sprintf("--num-gpus=%d", r.NumGPUs),
		fmt.Sprintf("--num-cpus=%d", p.NumCPUs),
		"--temp-dir=" + p.TempDir,
		"--node-name=" + r.NodeName,
		"--resources=" + resources,
	}
	if len(r.Labels) > 0 { // Ray refuses an empty --labels value on some releases
		argv = append(argv, "--labels="+labelString(r.Labels))
	}
	return argv, Env(p)
}

// Env is Ray's environment: the agent's, minus what Dropped names, plus
// TLS and token settings, with the shim dir first on PYTHONPATH.
func Env(p Params) []string {
	env, pythonPath := inherited(p.Env, p.Secrets)
	env = append(env,
		"RAY_USE_TLS=1",
		"RAY_TLS_SERVER_CERT="+p.NodeCert,
		"RAY_TLS_SERVER_KEY="+p.NodeKey,
		"RAY_TLS_CA_CERT="+p.CACert,
		"RAY_AUTH_MODE=token",
		"RAY_AUTH_TOKEN_PATH="+p.ClusterTokenPath,
		"RAY_CLOUD_INSTANCE_ID="+p.CandidateID,
		"RAY_NODE_TYPE_NAME="+p.NodeType,
	)
	mesh := p.MeshAddr != "" && p.ShimDir != ""
	if mesh {
		env = append(env, MeshEnv+"="+p.MeshAddr)
	}
	env = append(env, trainingEnv(env, p.Iface, mesh)...)
	env = append(env, gcsWaitEnv(env)...)
	switch {
	case p.ShimDir != "" && pythonPath != "":
		env = append(env, "PYTHONPATH="+p.ShimDir+":"+pythonPath)
	case p.ShimDir != "":
		env = append(env, "PYTHONPATH="+p.ShimDir)
	case pythonPath != "":
		env = append(env, "PYTHONPATH="+pythonPath)
	}
	return env
}

// GCSReconnectS is how long the node's raylet and workers wait for the
// Ray head's GCS to come back (RAY_gcs_rpc_server_reconnect_timeout_s; Ray's
// default is 60 s): the head's GCS keeps the cluster in a store and a
// restart of the Ray head takes about 10 s, a slow one up to a minute, and
// the head names the same Ray head meanwhile, so the agent leaves Ray be.
// Not forever: a raylet that waited this long exits and the agent restarts
// it. A value the user set is kept.
const GCSReconnectS = "120"

// gcsWaitEnv is RAY_gcs_rpc_server_reconnect_timeout_s unless kept sets it.
func gcsWaitEnv(kept []string) []string {
	const name = "RAY_gcs_rpc_server_reconnect_timeout_s"
	for _, kv := range kept {
		if strings.HasPrefix(kv, name+"=") {
			return nil
		}
	}
	return []string{name + "=" + GCSReconnectS}
}

// Scrubbed is env as Ray would inherit it, before anything is added: no
// RAYVAST_* or vast secret by name, no value holding a secret. The version
// probe runs the found Python in it, so it sees what Ray will see.
func Scrubbed(env, secrets []string) []string {
	kept, pythonPath := inherited(env, secrets)
	if pythonPath != "" {
		kept = append(kept, "PYTHONPATH="+pythonPath)
	}
	return kept
}

// inherited filters env and returns PYTHONPATH apart (Env puts the shim
// dir in front of it).
func inherited(env, secrets []string) (kept []string, pythonPath string) {
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || Dropped(name) || secret.Holds(value, secrets) {
			continue
		}
		if name == "PYTHONPATH" {
			pythonPath = value
			continue
		}
		kept = append(kept, kv)
	}
	return kept, pythonPath
}

// vastSecrets are variables vast sets that grant access to the account or
// the instance; Ray needs none of them.
var vastSecrets = map[string]bool{
	wire.EnvVastAPIKey:  true, // CONTAINER_API_KEY
	"VAST_API_KEY":      true,
	"OPEN_BUTTON_TOKEN": true, // vast's instance portal login
	"JUPYTER_TOKEN":     true, // vast's Jupyter launch mode
	"JUPYTER_PASSWORD":  true,
}

// ours are set by Command itself; an inherited value must not override or
// shadow them (RAY_AUTH_TOKEN would put a token in the env).
var ours = map[string]bool{
	"RAY_USE_TLS": true, "RAY_TLS_SERVER_CERT": true, "RAY_TLS_SERVER_KEY": true,
	"RAY_TLS_CA_CERT": true, "RAY_AUTH_MODE": true, "RAY_AUTH_TOKEN_PATH": true, "RAY_AUTH_TOKEN": true,
	"RAY_CLOUD_INSTANCE_ID": true, "RAY_NODE_TYPE_NAME": true, MeshEnv: true,
}

// Dropped reports whether a variable never reaches Ray by its name alone.
func Dropped(name string) bool {
	if strings.HasPrefix(name, "RAYVAST_") || vastSecrets[name] || ours[name] {
		return true
	}
	if strings.HasPrefix(name, "VAST_") {
		for _, s := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD"} {
			if strings.Contains(name, s) {
				return true
			}
		}
	}
	return false
}

// labelString is Ray's own --labels format, "k1=v1,k2=v2" (sorted, for a
// stable argv): Ray 2.52 and later parse it first and warn that JSON is
// deprecated (ray/scripts/scripts.py, ray/_private/label_utils.py). The
// head's config holds labels to Ray's label syntax, which has neither
// commas nor equals signs, so no quoting is needed.
func labelString(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + labels[k]
	}
	return strings.Join(pairs, ",")
}

func mustJSON(v any) string {
	b, err := json.Marshal(v) // maps marshal with sorted keys: stable argv
	if err != nil {
		panic(err) // map[string]float64/string cannot fail, except NaN/Inf
	}
	return string(b)
}
