// Package enrolltest makes a real cluster CA and a valid enroll answer for
// agent tests, so each test changes one field instead of building PEM.
package enrolltest

import (
	"encoding/base64"
	"net/netip"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// Secrets used in every fixture bundle, so tests can grep logs and envs for them.
const (
	ClusterToken  = "cluster-token-Zq1XqVYp0m3wT9fK2uS8"
	AppRootKeyB64 = "YXBwLXJvb3Qta2V5LTMyLWJ5dGVzLWxvbmctLS0tLS0=" // 32 bytes
	ShimContent   = "# rayvast shim\nimport os\n"
)

// Ports returns 64 distinct ports starting at base.
func Ports(base int) []int {
	p := make([]int, wire.PortCount)
	for i := range p {
		p[i] = base + i
	}
	return p
}

// CA makes a fresh cluster CA.
func CA(t testing.TB) *pki.CA {
	t.Helper()
	ca, _, err := pki.NewCA(nil, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// Response is a valid enroll answer for instanceID at ip with ports from the
// candidate's 64, signed by ca.
func Response(t testing.TB, ca *pki.CA, instanceID, ip string, ports []int) wire.EnrollResponse {
	t.Helper()
	node, err := ca.IssueNode(nil, pki.NodeRequest{InstanceID: instanceID, PublicIP: netip.MustParseAddr(ip), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return wire.EnrollResponse{
		Version: wire.Version, NodeCert: string(node.CertPEM), NodeKey: string(node.KeyPEM.Reveal()),
		CACert: string(ca.CertPEM), ClusterToken: ClusterToken, AppID: "app-1", AppRootKey: AppRootKeyB64,
		CandidateID: "c-0123456789abcdef", NodeType: "gpu1",
		Shim: &wire.Shim{Name: "sitecustomize.py", ContentB64: base64.StdEncoding.EncodeToString([]byte(ShimContent))},
		Ray: wire.RayParams{HeadAddress: "198.51.100.1:6379", NodeIPAddress: ip, NodeName: instanceID, NumCPUs: 8,
			NodeManagerPort: ports[0], ObjectManagerPort: ports[1], RuntimeEnvAgentPort: ports[2],
			DashboardAgentGRPCPort: ports[3], DashboardAgentListenPort: ports[4], MetricsExportPort: ports[5],
			WorkerPorts: ports[6:9], NumGPUs: 1,
			Resources: map[string]float64{"a100": 1}, Labels: map[string]string{"zone": "eu"}},
		GuestAPI:  wire.GuestAPIGrant{Port: ports[63]},
		Heartbeat: wire.HeartbeatParams{Port: 8444, IntervalS: 30},
	}
}
