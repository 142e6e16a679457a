// Package bundle checks the head's enroll answer (docs/protocol.md §6 step 9) and
// writes it into the agent's private state dir (§9) for Ray to read.
package bundle

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// DefaultHeartbeatInterval is used when the head names none.
const DefaultHeartbeatInterval = 30 * time.Second

// Bundle is an enroll answer after every check: the node identity, the
// secrets (in redacting types) and the Ray, guest API and heartbeat params.
type Bundle struct {
	InstanceID   string
	CandidateID  string          // Ray's RAY_CLOUD_INSTANCE_ID
	NodeType     string          // Ray's RAY_NODE_TYPE_NAME
	NodeCert     tls.Certificate // leaf + key, for mutual TLS and the guest API
	NodeCertPEM  []byte
	NodeKeyPEM   secret.Bytes
	CA           *x509.Certificate
	CACertPEM    []byte
	ClusterToken secret.String
	AppID        string
	AppRootKey   secret.Bytes // 32 bytes
	Shim         *Shim        // nil: no shim
	Ray          wire.RayParams
	GuestAPI     wire.GuestAPIGrant
	Heartbeat    wire.HeartbeatParams
	MeshPort     int // the mesh's port of the 64; 0: the head carries no mesh
}

// Secrets are the bundle's secrets, for scrubbing copies of them out of
// what the agent hands on (secret.Holds). A secret field added to Bundle
// belongs here too.
func (b *Bundle) Secrets() []secret.Former {
	return []secret.Former{b.NodeKeyPEM, b.ClusterToken, b.AppRootKey}
}

// Shim is a Python file put first on Ray's PYTHONPATH.
type Shim struct {
	Name    string
	Content []byte
}

// maxHeartbeatInterval caps the head's interval (heartbeat.MaxInterval):
// seconds are compared before multiplying, which could overflow.
const maxHeartbeatInterval = time.Hour

// HeartbeatInterval is the head's interval (at most an hour), or the default.
func (b *Bundle) HeartbeatInterval() time.Duration {
	s := b.Heartbeat.IntervalS
	switch {
	case s <= 0:
		return DefaultHeartbeatInterval
	case s > int(maxHeartbeatInterval/time.Second):
		return maxHeartbeatInterval
	}
	return time.Duration(s) * time.Second
}

// shimName is one plain file name: no path, no leading dot.
var shimName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// Parse checks an enroll answer against what the agent already knows: the
// pinned CA, its instance ID and its 64 ports. Errors never quote secrets.
func Parse(resp wire.EnrollResponse, pinned *x509.Certificate, instanceID string, ports []int) (*Bundle, error) {
	b := &Bundle{InstanceID: instanceID, CandidateID: resp.CandidateID, NodeType: resp.NodeType,
		AppID: resp.AppID, Ray: resp.Ray, GuestAPI: resp.GuestAPI, Heartbeat: resp.Heartbeat}
	if resp.Mesh != nil {
		b.MeshPort = resp.Mesh.Port
	}
	ca, err := pki.ParseCert([]byte(resp.CACert))
	if err != nil {
		return nil, fmt.Errorf("bundle ca_cert: %w", err)
	}
	if !bytes.Equal(ca.Raw, pinned.Raw) {
		return nil, errors.New("bundle ca_cert: not the pinned CA")
	}
	b.CA, b.CACertPEM = ca, []byte(resp.CACert)
	if err := b.parseNode(resp); err != nil {
		return nil, err
	}
	b.ClusterToken = secret.New(resp.ClusterToken)
	if b.ClusterToken.IsZero() {
		return nil, errors.New("bundle cluster_token: empty")
	}
	if !wire.ValidInstanceID(resp.AppID) {
		return nil, errors.New("bundle app_id: want 1-64 of [A-Za-z0-9._-]")
	}
	key, err := base64.StdEncoding.DecodeString(resp.AppRootKey)
	if err != nil || len(key) != 32 {
		return nil, errors.New("bundle app_root_key: want base64 of 32 bytes")
	}
	b.AppRootKey = secret.NewBytes(key)
	if resp.Shim != nil {
		if !shimName.MatchString(resp.Shim.Name) {
			return nil, fmt.Errorf("bundle shim name %q: want one plain file name", resp.Shim.Name)
		}
		content, err := base64.StdEncoding.DecodeString(resp.Shim.ContentB64)
		if err != nil {
			return nil, fmt.Errorf("bundle shim content: %w", err)
		}
		b.Shim = &Shim{Name: resp.Shim.Name, Content: content}
	}
	if err := checkPorts(resp, ports); err != nil {
		return nil, err
	}
	if resp.Ray.HeadAddress == "" || resp.Ray.NodeIPAddress == "" {
		return nil, errors.New("bundle ray: head_address and node_ip_address are required")
	}
	if err := checkIdentity(resp, instanceID); err != nil {
		return nil, err
	}
	if resp.Heartbeat.Port < 1 || resp.Heartbeat.Port > 65535 {
		return nil, errors.New("bundle heartbeat.port: out of range")
	}
	return b, nil
}

// parseNode checks that the node key matches its certificate, that the CA
// signed it for client and server use, and that it names this instance.
func (b *Bundle) parseNode(resp wire.EnrollResponse) error {
	pair, err := tls.X509KeyPair([]byte(resp.NodeCert), []byte(resp.NodeKey))
	if err != nil {
		return errors.New("bundle node_cert/node_key: not a matching PEM certificate and key")
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("bundle node_cert: %w", err)
		}
		pair.Leaf = leaf
	}
	pool := x509.NewCertPool()
	pool.AddCert(b.CA)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("bundle node_cert: %w", err)
	}
	id, err := pki.InstanceID(leaf)
	if err != nil {
		return fmt.Errorf("bundle node_cert: %w", err)
	}
	if id != b.InstanceID {
		return fmt.Errorf("bundle node_cert: names instance %q, not %q", id, b.InstanceID)
	}
	b.NodeCert, b.NodeCertPEM, b.NodeKeyPEM = pair, []byte(resp.NodeCert), secret.NewBytes([]byte(resp.NodeKey))
	return nil
}

// checkPorts: every port the agent will open must be one of its 64 (the
// only ones vast forwards), and no two uses may share one.
func checkPorts(resp wire.EnrollResponse, ports []int) error {
	r := resp.Ray
	named := map[string]int{
		"node_manager_port": r.NodeManagerPort, "object_manager_port": r.ObjectManagerPort,
		"runtime_env_agent_port": r.RuntimeEnvAgentPort, "dashboard_agent_grpc_port": r.DashboardAgentGRPCPort,
		"dashboard_agent_listen_port": r.DashboardAgentListenPort, "metrics_export_port": r.MetricsExportPort,
		"guest_api.port": resp.GuestAPI.Port,
	}
	if resp.Mesh != nil {
		named["mesh.port"] = resp.Mesh.Port
	}
	used := map[int]string{}
	use := func(name string, p int) error {
		if !slices.Contains(ports, p) {
			return fmt.Errorf("bundle %s %d: not one of the candidate's ports", name, p)
		}
		if other, dup := used[p]; dup {
			return fmt.Errorf("bundle %s %d: also used by %s", name, p, other)
		}
		used[p] = name
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(named)) {
		if err := use(name, named[name]); err != nil {
			return err
		}
	}
	if len(r.WorkerPorts) == 0 {
		return errors.New("bundle worker_ports: empty")
	}
	for _, p := range r.WorkerPorts {
		if err := use("worker_ports", p); err != nil {
			return err
		}
	}
	if r.NumGPUs < 0 {
		return errors.New("bundle num_gpus: negative")
	}
	return nil
}

// checkIdentity: the names that reach Ray's argv and env are plain
// identifiers, and Ray's node name is this instance (docs/protocol.md §6 step 9).
func checkIdentity(resp wire.EnrollResponse, instanceID string) error {
	if !wire.ValidInstanceID(resp.CandidateID) {
		return errors.New("bundle candidate_id: want 1-64 of [A-Za-z0-9._-]")
	}
	if !wire.ValidInstanceID(resp.NodeType) {
		return errors.New("bundle node_type: want 1-64 of [A-Za-z0-9._-]")
	}
	if resp.Ray.NodeName != instanceID {
		return fmt.Errorf("bundle ray.node_name %q: want the instance id %q", resp.Ray.NodeName, instanceID)
	}
	if resp.Ray.NumCPUs < 1 {
		return errors.New("bundle ray.num_cpus: want at least 1")
	}
	return nil
}
