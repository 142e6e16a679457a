package raylaunch

import (
	"slices"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/wire"
)

const (
	joinToken    = "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80"
	clusterToken = "cluster-token-Zq1XqVYp0m3wT9fK2uS8"
	apiKey       = "vast-container-api-key-9f8e7d"
)

func params() Params {
	return Params{
		Python: "/opt/conda/bin/python3",
		Ray: wire.RayParams{HeadAddress: "198.51.100.1:6379", NodeIPAddress: "203.0.113.7",
			NodeManagerPort: 40000, ObjectManagerPort: 40001, RuntimeEnvAgentPort: 40002,
			DashboardAgentGRPCPort: 40003, DashboardAgentListenPort: 40004, MetricsExportPort: 40005,
			WorkerPorts: []int{40006, 40007, 40008}, NumGPUs: 2, NodeName: "inst-7", NumCPUs: 53,
			Resources: map[string]float64{"b": 2, "a100": 1}, Labels: map[string]string{"zone": "eu", "gpu": "a100"}},
		NumCPUs: 4, TempDir: "/run/rayvast/ray", CandidateID: "c-00aa11bb22cc33dd", NodeType: "gpu1",
		NodeCert: "/run/rayvast/node.crt", NodeKey: "/run/rayvast/node.key", CACert: "/run/rayvast/ca.crt",
		ClusterTokenPath: "/run/rayvast/cluster_token", ShimDir: "/run/rayvast/shim",
		Env:     []string{"PATH=/usr/bin", "HOME=/root"},
		Secrets: []string{joinToken, clusterToken, apiKey},
	}
}

// TestArgv pins the exact docs/protocol.md §9 command line.
func TestArgv(t *testing.T) {
	got, _ := Command(params())
	want := []string{"/opt/conda/bin/python3", "-m", "ray.scripts.scripts", "start", "--block",
		"--address=198.51.100.1:6379", "--node-ip-address=203.0.113.7",
		"--node-manager-port=40000", "--object-manager-port=40001", "--runtime-env-agent-port=40002",
		"--dashboard-agent-grpc-port=40003", "--dashboard-agent-listen-port=40004", "--metrics-export-port=40005",
		"--worker-port-list=40006,40007,40008", "--num-gpus=2",
		"--num-cpus=4", "--temp-dir=/run/rayvast/ray", "--node-name=inst-7",
		`--resources={"a100":1,"b":2}`, `--labels=gpu=a100,zone=eu`}
	if !slices.Equal(got, want) {
		t.Errorf("argv:\ngot  %q\nwant %q", got, want)
	}
	// No labels: no --labels at all (some Ray releases refuse an empty
	// value); no resources: an empty JSON object.
	for _, labels := range []map[string]string{nil, {}} {
		p := params()
		p.Ray.Resources, p.Ray.Labels = nil, labels
		got, _ = Command(p)
		if last := got[len(got)-1]; last != "--resources={}" {
			t.Errorf("labels %v: last arg %q, want --resources={}", labels, last)
		}
		for _, a := range got {
			if strings.HasPrefix(a, "--labels") {
				t.Errorf("labels %v: argv has %q", labels, a)
			}
		}
	}
}

// TestRayIdentityEnv: Ray's autoscaler identity comes from the bundle,
// and inherited values cannot override it.
func TestRayIdentityEnv(t *testing.T) {
	p := params()
	p.Env = append(p.Env, "RAY_CLOUD_INSTANCE_ID=spoofed", "RAY_NODE_TYPE_NAME=spoofed")
	_, env := Command(p)
	for _, want := range []string{"RAY_CLOUD_INSTANCE_ID=c-00aa11bb22cc33dd", "RAY_NODE_TYPE_NAME=gpu1"} {
		name := strings.SplitN(want, "=", 2)[0]
		if !slices.Contains(env, want) || countPrefix(env, name+"=") != 1 {
			t.Errorf("want exactly one %q in %q", want, env)
		}
	}
}

// TestScrubbed: the version probe's env is Ray's inherited env: secrets
// out, PYTHONPATH kept (it finds the image's ray), nothing of ours added.
func TestScrubbed(t *testing.T) {
	in := []string{"PATH=/usr/bin", "PYTHONPATH=/app", "RAYVAST_JOIN_TOKEN=x", "CONTAINER_API_KEY=k", "COPY=" + joinToken}
	got := Scrubbed(in, []string{joinToken})
	want := []string{"PATH=/usr/bin", "PYTHONPATH=/app"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestEnv proves which inherited variables reach Ray and what is added.
func TestEnv(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      []string
		shimDir string
		keep    []string // must be in Ray's env
		drop    []string // name=… that must not be
	}{
		{"plain vars kept", []string{"PATH=/usr/bin", "LANG=C.UTF-8", "HF_HOME=/data"}, "/s", []string{"PATH=/usr/bin", "LANG=C.UTF-8", "HF_HOME=/data"}, nil},
		{"every RAYVAST_ var dropped", []string{"RAYVAST_HEAD=198.51.100.1", "RAYVAST_PYTHON=/usr/bin/python3", "RAYVAST_JOIN_TOKEN=x", "RAYVAST_ANYTHING=1"}, "/s", nil, []string{"RAYVAST_"}},
		{"vast secrets dropped", []string{"CONTAINER_API_KEY=k", "VAST_API_KEY=k", "OPEN_BUTTON_TOKEN=t", "VAST_SOME_TOKEN=t", "VAST_TCP_PORT_70000=40000"}, "/s",
			[]string{"VAST_TCP_PORT_70000=40000"}, []string{"CONTAINER_API_KEY=", "VAST_API_KEY=", "OPEN_BUTTON_TOKEN=", "VAST_SOME_TOKEN="}},
		{"value equal to a secret dropped", []string{"X=" + joinToken, "Y=" + clusterToken, "Z=" + apiKey}, "/s", nil, []string{"X=", "Y=", "Z="}},
		{"value containing a secret dropped", []string{"AUTH=Bearer " + clusterToken}, "/s", nil, []string{"AUTH="}},
		{"inherited Ray auth replaced", []string{"RAY_AUTH_TOKEN=abc", "RAY_AUTH_MODE=disabled", "RAY_USE_TLS=0"}, "/s",
			[]string{"RAY_AUTH_MODE=token", "RAY_USE_TLS=1"}, []string{"RAY_AUTH_TOKEN=", "RAY_AUTH_MODE=disabled", "RAY_USE_TLS=0"}},
		{"shim first on PYTHONPATH", []string{"PYTHONPATH=/app:/lib"}, "/s", []string{"PYTHONPATH=/s:/app:/lib"}, nil},
		{"shim alone", nil, "/s", []string{"PYTHONPATH=/s"}, nil},
		{"no shim keeps PYTHONPATH", []string{"PYTHONPATH=/app"}, "", []string{"PYTHONPATH=/app"}, nil},
		{"malformed entry dropped", []string{"NOEQUALS"}, "/s", nil, []string{"NOEQUALS"}},
		{"short secret only by equality", []string{"A=ab", "B=xaby"}, "/s", []string{"B=xaby"}, []string{"A="}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := params()
			p.Env, p.ShimDir = c.in, c.shimDir
			p.Secrets = append(p.Secrets, "ab") // a short secret
			_, env := Command(p)
			for _, k := range c.keep {
				if !slices.Contains(env, k) {
					t.Errorf("%q missing from %q", k, env)
				}
			}
			for _, d := range c.drop {
				for _, kv := range env {
					if strings.HasPrefix(kv, d) {
						t.Errorf("%q reached Ray", kv)
					}
				}
			}
			if n := countPrefix(env, "PYTHONPATH="); n > 1 {
				t.Errorf("PYTHONPATH set %d times", n)
			}
			for _, want := range []string{"RAY_USE_TLS=1", "RAY_TLS_SERVER_CERT=/run/rayvast/node.crt", "RAY_TLS_SERVER_KEY=/run/rayvast/node.key",
				"RAY_TLS_CA_CERT=/run/rayvast/ca.crt", "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN_PATH=/run/rayvast/cluster_token"} {
				if !slices.Contains(env, want) || countPrefix(env, strings.SplitN(want, "=", 2)[0]+"=") != 1 {
					t.Errorf("want exactly one %q in %q", want, env)
				}
			}
			for _, kv := range env {
				for _, s := range p.Secrets[:3] {
					if strings.Contains(kv, s) {
						t.Errorf("a secret reached Ray's env in %s", strings.SplitN(kv, "=", 2)[0])
					}
				}
			}
		})
	}
}

func countPrefix(env []string, prefix string) int {
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, prefix) {
			n++
		}
	}
	return n
}
