package meshnet

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// needTorch skips (fails in CI) without root, the tools, or Debian's torch.
func needTorch(t testing.TB) {
	t.Helper()
	rvtest.NeedRoot(t, "ip", "nft", "gcc")
	if err := exec.Command("/usr/bin/python3", "-c", "import torch.distributed as d; assert d.is_gloo_available()").Run(); err != nil {
		rvtest.Need(t, "no torch with gloo for /usr/bin/python3 (apt-get install python3-torch): "+err.Error())
	}
}

// nativeLib builds the shim's native library as build.sh does.
func nativeLib(t testing.TB) string {
	t.Helper()
	out := t.TempDir()
	_, file, _, _ := runtime.Caller(0)
	build := filepath.Join(filepath.Dir(file), "..", "..", "head", "shim", "native", "build.sh")
	if b, err := exec.Command(build, out).CombinedOutput(); err != nil {
		t.Fatalf("native build: %v\n%s", err, b)
	}
	libs, _ := filepath.Glob(filepath.Join(out, "natshim-*.so"))
	if len(libs) != 1 {
		t.Fatalf("native build made %q", libs)
	}
	return libs[0]
}

func checkOps(t *testing.T, res []rank, marker string) {
	t.Helper()
	for _, r := range res {
		if !r.OK {
			t.Errorf("rank %d failed: %s\n%s", r.Rank, r.Exception, r.raw)
			continue
		}
		if fmt.Sprint(r.AllReduce) != "[3 3 3 3]" || fmt.Sprint(r.Broadcast) != "[0 1 2]" ||
			r.Object["marker"] != marker || fmt.Sprint(r.Group) != "[2 2]" {
			t.Errorf("rank %d: all_reduce %v broadcast %v object %v group %v", r.Rank, r.AllReduce, r.Broadcast, r.Object, r.Group)
		}
	}
}

// TestTorchAcrossMesh is issue 30's training case with real torch
// (Debian's 1.13.1, gloo) on vast's network: a rendezvous at rank 0's node
// IP on a port vast does not forward, as Ray Train sets it up, then
// all_reduce, broadcast, broadcast_object_list and new_group, with two
// ranks on one node and with one rank on each of two nodes; a rank killed
// mid-job fails the other within 60 s; a capture on the path between the
// nodes holds the mesh's TLS handshake but not the marker the job
// broadcasts; a stranger at the mesh port gets no stream. The control,
// the shim without the mesh (the code before it), fails across nodes.
func TestTorchAcrossMesh(t *testing.T) {
	needTorch(t)
	lib := nativeLib(t)
	v := newVastNet(t)
	c := startCluster(t, v)
	defer func() {
		if t.Failed() {
			for i, l := range c.logs {
				t.Logf("mesh of node%d:\n%s", i, l.String())
			}
		}
	}()

	t.Run("control: across two nodes without the mesh", func(t *testing.T) {
		c.timeoutS = "8"
		defer func() { c.timeoutS = "" }()
		res := c.runRanks(t, lib, false, []int{0, 1}, "ops", "m")
		if res[1].OK {
			t.Errorf("rank 1 on another node reached rank 0's store without the mesh: the network routes what vast does not")
		} else {
			t.Logf("as on vast without the mesh: %s", res[1].Exception)
		}
	})
	t.Run("two ranks on one node", func(t *testing.T) {
		checkOps(t, c.runRanks(t, lib, true, []int{0, 0}, "ops", "one-node-marker"), "one-node-marker")
	})
	t.Run("one rank on each of two nodes, nothing in plaintext on the path", func(t *testing.T) {
		capture := filepath.Join(t.TempDir(), "path.bin")
		sniff, _ := filepath.Abs("testdata/sniff.py")
		cmd := exec.Command("ip", "netns", "exec", v.router, "/usr/bin/python3", sniff, "r1", capture)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 6)
		out.Read(buf) // "ready\n"
		marker := fmt.Sprintf("rayvast-marker-%d-plaintext", time.Now().UnixNano())
		res := c.runRanks(t, lib, true, []int{0, 1}, "ops", marker)
		cmd.Process.Signal(os.Interrupt)
		cmd.Process.Kill()
		cmd.Wait()
		checkOps(t, res, marker)
		b, err := os.ReadFile(capture)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("rayvast-mesh/1")) {
			t.Errorf("the capture (%d bytes) holds no mesh handshake: it did not see the path", len(b))
		}
		if bytes.Contains(b, []byte(marker)) {
			t.Errorf("the marker crossed the path between the nodes in plaintext")
		}
		t.Logf("capture between the nodes: %d bytes, the mesh's handshake in it, the marker not", len(b))
	})
	t.Run("a rank killed mid-job fails the other within 60 s", func(t *testing.T) {
		start := time.Now()
		res := c.runRanks(t, lib, true, []int{0, 1}, "die")
		r := res[0]
		if r.Error == nil || *r.Error == "" {
			t.Fatalf("rank 0 did not fail after rank 1 died: %+v\n%s", r, r.raw)
		}
		if r.FailedAfterS > 60 {
			t.Errorf("rank 0 failed only after %.1f s", r.FailedAfterS)
		}
		t.Logf("rank 0 failed after %.2f s (whole job %s): %s", r.FailedAfterS, time.Since(start).Round(time.Millisecond), *r.Error)
	})
	t.Run("a stranger at the mesh port gets no stream", func(t *testing.T) {
		script, _ := filepath.Abs("testdata/stranger.py")
		n := v.nodes[1]
		out, _ := exec.Command("ip", "netns", "exec", v.nodes[2].ns, "/usr/bin/python3", script, n.public, fmt.Sprint(n.meshPort()), "22").CombinedOutput()
		if !strings.HasPrefix(string(out), "REFUSED") {
			t.Errorf("stranger: %s", out)
		}
	})
}
