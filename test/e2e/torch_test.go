package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestTorchOnRayNewest and TestTorchOnRayOldest (issue 30): training
// through real Ray on rentals behind vast's NAT (Debian's python3-torch
// 1.13.1, gloo, in the nodes' image; the vast network in Docker, where
// rentals reach one another only at public IP and forwarded port). Ray
// actors set torch.distributed up as Ray Train's TorchTrainer does (rank
// 0's ray.util.get_node_ip_address(), a port the kernel picks, tcp://
// init), with two ranks on one node and one on each of two nodes, then
// all_reduce, broadcast_object_list of a marker and new_group; and Ray's
// own ray.util.collective with backend "gloo" across the two nodes. Each
// case fails without the agents' mesh (the rendezvous port is none of the
// 64, and a rank's own public IP has no hairpin). What the mesh carries is
// encrypted and for the cluster alone: test/meshnet proves that part.
func TestTorchOnRayNewest(t *testing.T) { testTorchOnRay(t, rvtest.RayNewest) }

// TestTorchOnRayOldest is TestTorchOnRayNewest with the oldest supported Ray.
func TestTorchOnRayOldest(t *testing.T) { testTorchOnRay(t, rvtest.RayOldest) }

// torchRank is one rank's answer in torchjob.py's result.
type torchRank struct {
	Rank      int               `json:"rank"`
	NodeIP    string            `json:"node_ip"`
	OK        bool              `json:"ok"`
	Error     string            `json:"error"`
	AllReduce []float64         `json:"all_reduce"`
	Object    map[string]string `json:"object"`
	Group     []float64         `json:"group"`
	HostAddr  string            `json:"host_addr"`
}

type torchCase struct {
	Ranks      []torchRank `json:"ranks"`
	Rendezvous string      `json:"rendezvous"`
	Seconds    float64     `json:"seconds"`
}

func testTorchOnRay(t *testing.T, version string) {
	rvtest.NeedRoot(t, "ip", "iptables", "nft")
	image, python := rayImageWith(t, version, "python3-torch")
	c := startRayClusterImage(t, version, image, python, 2, 2, nil)
	nodes := c.waitRunning(2, 4*time.Minute)
	public := map[string]bool{}
	for _, n := range nodes {
		public[n.PublicIP] = true
	}
	checkTorchJob(t, c, public, []string{"one node", "two nodes", "collective"}, nil)
	t.Run("a co-tenant on a node's bridge reaches no listener of a Ray actor", func(t *testing.T) {
		cotenantInRayActor(t, c, image)
	})
	// The two hostname shapes that make gloo fall back to loopback when no
	// interface is named (issue 41): Debian's and Ubuntu's 127.0.1.1 line,
	// and no line at all with no resolver to ask. Each node's /etc/hosts
	// (and, for the second, resolv.conf) is rewritten in place; the ranks
	// report what their hostname resolves to, so the shape is proven to be
	// in Ray's workers, and must still train across the nodes.
	for _, shape := range []struct{ name, hosts, resolv, want string }{
		{"hostname at 127.0.1.1", "127.0.0.1 localhost\n127.0.1.1 $(hostname)\n", "", "127.0.1.1"},
		{"hostname unresolvable", "127.0.0.1 localhost\n", "nameserver 127.0.0.1\n", "gaierror"},
	} {
		t.Run(shape.name, func(t *testing.T) {
			setHostnameShape(t, c, shape.hosts, shape.resolv)
			checkTorchJob(t, c, public, []string{"two nodes", "collective"}, func(r torchRank) error {
				if !strings.HasPrefix(r.HostAddr, shape.want) {
					return fmt.Errorf("the hostname resolves to %q in the rank, want %s: the shape is not in place", r.HostAddr, shape.want)
				}
				return nil
			})
		})
	}
}

// setHostnameShape rewrites /etc/hosts (and /etc/resolv.conf when resolv
// is set) in every node container of c (printf formats; $(hostname) is the
// container's). Docker bind-mounts both files, so they are written in
// place, not renamed.
func setHostnameShape(t *testing.T, c *rayCluster, hosts, resolv string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := suite.eng.ListContainers(ctx, vastnet.LabelCluster+"="+c.name)
	if err != nil || len(cs) == 0 {
		t.Fatalf("the cluster's containers: %v (%d)", err, len(cs))
	}
	script := `printf "` + hosts + `" > /etc/hosts`
	if resolv != "" {
		script += ` && printf "` + resolv + `" > /etc/resolv.conf`
	}
	for _, ct := range cs {
		if ct.State != "running" {
			continue
		}
		if out, err := exec.CommandContext(ctx, "docker", "exec", ct.ID, "sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("docker exec %v: %v\n%s", ct.Names, err, out)
		}
	}
}

// checkTorchJob runs torchjob.py through head run and checks the cases
// named (each rank's all_reduce, broadcast object and new_group; one node
// or two; the rendezvous at a public IP as Ray Train sets it) and, with
// check, each rank.
func checkTorchJob(t *testing.T, c *rayCluster, public map[string]bool, cases []string, check func(torchRank) error) {
	t.Helper()
	marker := fmt.Sprintf("rayvast-torch-marker-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.head, "run", "--state", c.state, "--", "python",
		filepath.Join(suite.repo, "test", "e2e", "testdata", "torchjob.py"), marker)
	b, err := cmd.CombinedOutput()
	out := string(b)
	var res map[string]json.RawMessage
	for _, l := range strings.Split(out, "\n") {
		if j, ok := strings.CutPrefix(l, "TORCHJOB "); ok {
			if err := json.Unmarshal([]byte(j), &res); err != nil {
				t.Fatalf("torchjob.py's result: %v\n%s", err, j)
			}
		}
	}
	if err != nil || res == nil {
		t.Fatalf("torchjob.py through head run: %v\n%s", err, out)
	}
	for _, name := range cases {
		var tc torchCase
		if err := json.Unmarshal(res[name], &tc); err != nil || len(tc.Ranks) != 2 {
			t.Errorf("%s: no result (%v):\n%s", name, err, out)
			continue
		}
		ips := map[string]bool{}
		for _, r := range tc.Ranks {
			ips[r.NodeIP] = true
			if !r.OK {
				t.Errorf("%s: rank %d on %s failed: %s", name, r.Rank, r.NodeIP, r.Error)
				continue
			}
			if fmt.Sprint(r.AllReduce) != "[3 3 3 3]" {
				t.Errorf("%s: rank %d all_reduce %v, want [3 3 3 3]", name, r.Rank, r.AllReduce)
			}
			if name != "collective" && (r.Object["marker"] != marker || fmt.Sprint(r.Group) != "[2 2]") {
				t.Errorf("%s: rank %d broadcast_object_list %v, new_group all_reduce %v", name, r.Rank, r.Object, r.Group)
			}
			if check != nil {
				if err := check(r); err != nil {
					t.Errorf("%s: rank %d: %v", name, r.Rank, err)
				}
			}
		}
		if want := map[string]int{"one node": 1}[name]; want == 1 && len(ips) != 1 || want == 0 && len(ips) != 2 {
			t.Errorf("%s: the ranks ran on %v", name, ips)
		}
		if host, _, _ := strings.Cut(tc.Rendezvous, ":"); name != "collective" && !public[host] {
			t.Errorf("%s: the rendezvous %s is not at a node's public IP (%v): not as Ray Train sets it up", name, tc.Rendezvous, public)
		}
		t.Logf("%s: %d ranks on %v, rendezvous %q, %.2f s", name, len(tc.Ranks), ips, tc.Rendezvous, tc.Seconds)
	}
}
