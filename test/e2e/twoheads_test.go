package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestTwoClustersOneMachine (issue 29): two `head up` clusters with real
// Ray on one machine at once, each a job through `ray job submit` (the
// dashboard's job API and its agent) whose task runs on its own cluster.
// Ray's fixed head ports (Ray Client 10001, dashboard agent 52365, metrics
// 44217/44227) once made the second Ray head fail or land on the first's;
// here each Ray head's ports are chosen free and head run reads its own.
// Provider none with no nodes: the Ray heads alone, each offering one CPU
// (ray.head_resources) so the job's task has somewhere to run.
func TestTwoClustersOneMachine(t *testing.T) {
	rvtest.NeedRoot(t, "ip")
	edit := func(cfg map[string]any) {
		cfg["provider"] = map[string]any{"kind": "none"}
		cfg["ray"].(map[string]any)["head_resources"] = map[string]any{"CPU": 1}
		headIP, _, _ := net.SplitHostPort(cfg["ray"].(map[string]any)["head_address"].(string))
		dummyAddress(t, headIP)
	}
	a := startRayClusterEdit(t, rvtest.RayNewest, 0, 1, edit, "--firewall", "off")
	b := startRayClusterEdit(t, rvtest.RayNewest, 0, 1, edit, "--firewall", "off")
	for _, c := range []*rayCluster{a, b} {
		c.waitRayHeadSettled(t, 3*time.Minute)
	}
	for _, c := range []*rayCluster{a, b} {
		dir := t.TempDir()
		script := "import ray\nray.init()\n@ray.remote\ndef f():\n    return ray.util.get_node_ip_address()\n" +
			"print('JOB-RAN-AT', ray.get(f.remote(), timeout=120))\n"
		if err := os.WriteFile(filepath.Join(dir, "job.py"), []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(suite.head, "run", "--state", c.state, "--", "ray", "job", "submit",
			"--working-dir", dir, "--", "python3", "job.py").CombinedOutput()
		want := "JOB-RAN-AT " + c.headIP
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("cluster %s: ray job submit: %v; output lacks %q:\n%s", c.name, err, want, out)
		}
	}
}
