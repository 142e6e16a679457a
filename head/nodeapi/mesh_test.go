package nodeapi

import (
	"crypto/tls"
	"encoding/json"
	"slices"
	"testing"

	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// withoutMesh is a heartbeat answer with its mesh block taken out, for
// tests of the other fields.
func withoutMesh(t testing.TB, body string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return body
	}
	delete(m, "mesh")
	b, _ := json.Marshal(m)
	var out struct {
		IntervalS int               `json:"interval_s"`
		Action    string            `json:"action"`
		RayHead   *wire.RayHeadRun  `json:"ray_head,omitempty"`
		Drain     *wire.DrainNotice `json:"drain,omitempty"`
	}
	_ = json.Unmarshal(b, &out)
	b, _ = json.Marshal(out)
	return string(b)
}

// enrollMesh makes inst a node with a mesh port and its 64 ports.
func (p *portB) enrollMesh(t testing.TB, inst, ip string, meshPort int) (tls.Certificate, wire.Candidate, []int) {
	t.Helper()
	c, tok, err := p.reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: inst, PublicIP: ip})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := p.reg.Claim(inst, ip, tok, secret.NewBytes(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 64)
	for i := range ports {
		ports[i] = meshPort - 7 + i
	}
	is := issue(t, p.ca, inst, ip, p.clk.Now(), 0)
	if _, err := p.reg.Complete(cl, registry.Enrolled{Serial: is.Serial, GuestAPIPort: meshPort - 1, MeshPort: meshPort, Ports: ports}); err != nil {
		t.Fatal(err)
	}
	return keyPair(t, is), c, ports
}

func (p *portB) beat(t testing.TB, cert *tls.Certificate, ip, inst, version string) wire.HeartbeatReply {
	t.Helper()
	h := hb(inst)
	h.MeshVersion = version
	st, body := p.post(t, ip, cert, "/heartbeat", h)
	if st != 200 {
		t.Fatalf("heartbeat of %s: %d %s", inst, st, body)
	}
	var r wire.HeartbeatReply
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMeshMembership proves what a heartbeat answer tells a node of the
// mesh: every enrolled node with its public IP, mesh port and 64 ports;
// nothing when the node already holds that version; and, once a node is
// ended, a new version without it (its certificate then opens no mesh).
func TestMeshMembership(t *testing.T) {
	p := newPortB(t)
	k1, _, ports1 := p.enrollMesh(t, "i1", "127.0.6.1", 20007)
	_, c2, _ := p.enrollMesh(t, "i2", "127.0.6.2", 30007)

	r := p.beat(t, &k1, "127.0.6.1", "i1", "")
	if r.Mesh == nil || len(r.Mesh.Peers) != 2 || r.Mesh.Version == "" {
		t.Fatalf("first heartbeat: mesh %+v, want both nodes", r.Mesh)
	}
	m1 := r.Mesh.Peers[0]
	if m1.InstanceID != "i1" || m1.PublicIP != "127.0.6.1" || m1.MeshPort != 20007 || !slices.Equal(m1.Ports, ports1) {
		t.Errorf("member i1: %+v", m1)
	}
	v1 := r.Mesh.Version
	if r := p.beat(t, &k1, "127.0.6.1", "i1", v1); r.Mesh != nil {
		t.Errorf("heartbeat holding the current version got the membership again: %+v", r.Mesh)
	}

	if _, err := p.reg.End(c2.CandidateID, "deleted"); err != nil {
		t.Fatal(err)
	}
	p.clk.Add(2 * meshMaxAge)
	r = p.beat(t, &k1, "127.0.6.1", "i1", v1)
	if r.Mesh == nil || r.Mesh.Version == v1 {
		t.Fatalf("after i2 ended: mesh %+v, want a new version", r.Mesh)
	}
	if len(r.Mesh.Peers) != 1 || r.Mesh.Peers[0].InstanceID != "i1" {
		t.Errorf("after i2 ended: peers %+v, want i1 alone", r.Mesh.Peers)
	}
}
