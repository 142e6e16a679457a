package rayhead

import (
	"net"
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

// Command is the Ray head's argv (SPEC §8 head up): python -m
// ray.scripts.scripts, the way the agent starts the nodes' Ray.
func Command(python, address string) []string {
	host, port, _ := net.SplitHostPort(address)
	return []string{python, "-m", "ray.scripts.scripts", "start", "--head", "--block",
		"--node-ip-address=" + host, "--port=" + port, "--disable-usage-stats"}
}

// Env is base with the Ray head's TLS, token and instance variables set
// (replacing any of them base already has), the same TLS and token setup
// the nodes' Ray gets.
func Env(base []string, f Files) []string {
	set := map[string]string{
		"RAY_USE_TLS":           "1",
		"RAY_TLS_SERVER_CERT":   f.Cert,
		"RAY_TLS_SERVER_KEY":    f.Key,
		"RAY_TLS_CA_CERT":       f.CA,
		"RAY_AUTH_MODE":         "token",
		"RAY_AUTH_TOKEN_PATH":   f.Token,
		"RAY_CLOUD_INSTANCE_ID": InstanceID,
		"RAY_NODE_TYPE_NAME":    NodeTypeName,
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"RAY_USE_TLS", "RAY_TLS_SERVER_CERT", "RAY_TLS_SERVER_KEY", "RAY_TLS_CA_CERT",
		"RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_CLOUD_INSTANCE_ID", "RAY_NODE_TYPE_NAME"} {
		out = append(out, k+"="+set[k])
	}
	return out
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
