package bundle

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/internal/enrolltest"
	"github.com/rayvast/rayvast/internal/wire"
)

const id, ip = "inst-1", "203.0.113.7"

func TestParseGood(t *testing.T) {
	ca := enrolltest.CA(t)
	ports := enrolltest.Ports(40000)
	b, err := Parse(enrolltest.Response(t, ca, id, ip, ports), ca.Cert, id, ports)
	if err != nil {
		t.Fatalf("valid bundle refused: %v", err)
	}
	if b.AppRootKey.Len() != 32 || b.ClusterToken.Reveal() != enrolltest.ClusterToken || b.Shim.Name != "sitecustomize.py" {
		t.Errorf("bundle not carried over: %+v", b)
	}
	if b.CandidateID != "c-0123456789abcdef" || b.NodeType != "gpu1" {
		t.Errorf("candidate id %q, node type %q not carried over", b.CandidateID, b.NodeType)
	}
	if b.NodeCert.Leaf == nil {
		t.Error("node cert has no leaf")
	}
}

// TestParseRejects proves each way a bundle can be wrong is refused, and
// that no error message quotes a secret.
func TestParseRejects(t *testing.T) {
	ca, other := enrolltest.CA(t), enrolltest.CA(t)
	ports := enrolltest.Ports(40000)
	for _, c := range []struct {
		name string
		mut  func(*wire.EnrollResponse)
		want string
	}{
		{"another CA", func(r *wire.EnrollResponse) { r.CACert = string(other.CertPEM) }, "not the pinned CA"},
		{"node cert from another CA", func(r *wire.EnrollResponse) {
			o := enrolltest.Response(t, other, id, ip, ports)
			r.NodeCert, r.NodeKey = o.NodeCert, o.NodeKey
		}, "node_cert"},
		{"node cert for another instance", func(r *wire.EnrollResponse) {
			o := enrolltest.Response(t, ca, "inst-2", ip, ports)
			r.NodeCert, r.NodeKey = o.NodeCert, o.NodeKey
		}, "names instance"},
		{"key of another cert", func(r *wire.EnrollResponse) { r.NodeKey = enrolltest.Response(t, ca, id, ip, ports).NodeKey }, "not a matching"},
		{"empty cluster token", func(r *wire.EnrollResponse) { r.ClusterToken = "" }, "cluster_token"},
		{"short app root key", func(r *wire.EnrollResponse) { r.AppRootKey = "c2hvcnQ=" }, "app_root_key"},
		{"shim path", func(r *wire.EnrollResponse) { r.Shim.Name = "../evil.py" }, "shim name"},
		{"shim dotfile", func(r *wire.EnrollResponse) { r.Shim.Name = ".pth" }, "shim name"},
		{"shim not base64", func(r *wire.EnrollResponse) { r.Shim.ContentB64 = "!!" }, "shim content"},
		{"ray port not ours", func(r *wire.EnrollResponse) { r.Ray.NodeManagerPort = 22 }, "node_manager_port 22"},
		{"worker port not ours", func(r *wire.EnrollResponse) { r.Ray.WorkerPorts = []int{40010, 9} }, "worker_ports 9"},
		{"port used twice", func(r *wire.EnrollResponse) { r.GuestAPI.Port = r.Ray.MetricsExportPort }, "also used"},
		{"no worker ports", func(r *wire.EnrollResponse) { r.Ray.WorkerPorts = nil }, "worker_ports"},
		{"heartbeat port", func(r *wire.EnrollResponse) { r.Heartbeat.Port = 0 }, "heartbeat.port"},
		{"no head address", func(r *wire.EnrollResponse) { r.Ray.HeadAddress = "" }, "head_address"},
		{"no candidate id", func(r *wire.EnrollResponse) { r.CandidateID = "" }, "candidate_id"},
		{"candidate id with spaces", func(r *wire.EnrollResponse) { r.CandidateID = "c 1" }, "candidate_id"},
		{"node type with newline", func(r *wire.EnrollResponse) { r.NodeType = "gpu\n" }, "node_type"},
		{"node name of another instance", func(r *wire.EnrollResponse) { r.Ray.NodeName = "inst-2" }, "node_name"},
		{"no num cpus", func(r *wire.EnrollResponse) { r.Ray.NumCPUs = 0 }, "num_cpus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := enrolltest.Response(t, ca, id, ip, ports)
			c.mut(&r)
			_, err := Parse(r, ca.Cert, id, ports)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			for _, s := range []string{enrolltest.ClusterToken, enrolltest.AppRootKeyB64, "PRIVATE KEY"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error quotes a secret: %v", err)
				}
			}
		})
	}
}

// TestWrite proves the state dir is 0700, keys and tokens 0600, the files
// hold what Ray needs, and bundle.json carries no secret.
func TestWrite(t *testing.T) {
	ca := enrolltest.CA(t)
	ports := enrolltest.Ports(40000)
	resp := enrolltest.Response(t, ca, id, ip, ports)
	b, err := Parse(resp, ca.Cert, id, ports)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o755); err != nil { // a loose pre-existing dir is tightened
		t.Fatal(err)
	}
	p, err := Write(dir, b, Switches{PublicTCBInfo: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
		want string
	}{
		{dir, 0o700 | os.ModeDir, ""},
		{p.NodeKey, 0o600, resp.NodeKey},
		{p.ClusterToken, 0o600, enrolltest.ClusterToken},
		{p.AppFile, 0o600, enrolltest.AppRootKeyB64},
		{p.NodeCert, 0o644, resp.NodeCert},
		{p.CACert, 0o644, resp.CACert},
		{filepath.Join(p.ShimDir, "sitecustomize.py"), 0o644, enrolltest.ShimContent},
	} {
		st, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, st.Mode(), c.mode)
		}
		if c.want != "" {
			got, _ := os.ReadFile(c.path)
			if !strings.Contains(string(got), c.want) {
				t.Errorf("%s does not hold what it should", c.path)
			}
		}
	}
	if got, _ := os.ReadFile(p.ClusterToken); string(got) != enrolltest.ClusterToken {
		t.Errorf("cluster_token file has %d bytes, want exactly the token", len(got))
	}
	var app wire.AppFile
	f, _ := os.Open(p.AppFile)
	defer f.Close()
	if err := wire.Decode(f, wire.MaxBody, &app); err != nil || app.NodeKey != p.NodeKey || !app.PublicTCBInfo {
		t.Errorf("app.json: %v %+v", err, app)
	}
	info, _ := os.ReadFile(p.Info)
	for _, s := range []string{enrolltest.ClusterToken, enrolltest.AppRootKeyB64, "PRIVATE KEY"} {
		if strings.Contains(string(info), s) {
			t.Errorf("bundle.json holds a secret")
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}

// TestHeartbeatIntervalBounded proves a head's interval_s never becomes a
// negative (overflowed) or decades-long Duration.
func TestHeartbeatIntervalBounded(t *testing.T) {
	for _, tc := range []struct {
		s    int
		want time.Duration
	}{{0, DefaultHeartbeatInterval}, {-1, DefaultHeartbeatInterval}, {30, 30 * time.Second},
		{3600, time.Hour}, {1_000_000_000, time.Hour}, {10_000_000_000, time.Hour}} {
		b := &Bundle{Heartbeat: wire.HeartbeatParams{IntervalS: tc.s}}
		if got := b.HeartbeatInterval(); got != tc.want {
			t.Errorf("interval_s %d: got %v, want %v", tc.s, got, tc.want)
		}
	}
}
