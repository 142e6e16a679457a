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
	t.Run("a co-tenant on node 0's bridge reaches no training listener", func(t *testing.T) {
		cotenantProbe(t, c, lib)
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

// cotenantProbe: while a job's ranks hold their listeners open (rank 0's
// TCPStore on node 0: gloo closes a pair's listener once the pair is
// connected; a listener of either kind gets the same guard), a co-tenant on node 0's host (its
// bridge, its public IP) dials each of them at node 0's private address
// and must reach none; the job still completes. The control: a listener
// of node 0's opened without the shim answers the same co-tenant, so the
// path is there and the shim's guard is what shuts it.
func cotenantProbe(t *testing.T, c *cluster, lib string) {
	v := c.net
	n0, cot := v.nodes[0], v.nodes[3]
	control := exec.Command("ip", "netns", "exec", n0.ns, "/usr/bin/python3", "-c",
		"import socket,time\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"+
			"s.bind(('0.0.0.0', 29999)); s.listen(); print('ready', flush=True); time.sleep(60)")
	cout, _ := control.StdoutPipe()
	if err := control.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { control.Process.Kill(); control.Wait() }()
	cout.Read(make([]byte, 6))
	if got := cotenantDial(t, cot, n0.private, []int{29999}); got[29999] != "connected" {
		t.Fatalf("control: the co-tenant does not reach node 0's plain listener (%s): the test's network lacks the shared bridge", got[29999])
	}
	done := make(chan []rank, 1)
	go func() { done <- c.runRanks(t, lib, true, []int{0, 1}, "hold") }()
	var ports []int
	for deadline := time.Now().Add(20 * time.Second); len(ports) == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		ports = trainingListeners(t, n0)
	}
	if len(ports) == 0 {
		t.Fatal("rank 0's TCPStore never listened on node 0")
	}
	for p, got := range cotenantDial(t, cot, n0.private, ports) {
		if got == "connected" {
			t.Errorf("the co-tenant connected to rank 0's listener %s:%d", n0.private, p)
		} else {
			t.Logf("co-tenant → %s:%d: %s", n0.private, p, got)
		}
	}
	for _, r := range <-done {
		if !r.OK {
			t.Errorf("rank %d: %s\n%s", r.Rank, r.Exception, r.raw)
		}
	}
}

// trainingListeners are the TCP ports listening in node n's namespace
// outside its 64 and off loopback (the control's 29999 left out).
func trainingListeners(t *testing.T, n netNode) []int {
	out, err := exec.Command("ip", "netns", "exec", n.ns, "ss", "-Htln").Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	var ports []int
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		i := strings.LastIndex(f[3], ":")
		host, p := f[3][:i], 0
		fmt.Sscan(f[3][i+1:], &p)
		if strings.HasPrefix(host, "127.") || host == "[::1]" || p == 29999 || (p >= n.firstPort && p < n.firstPort+64) {
			continue
		}
		ports = append(ports, p)
	}
	return ports
}

// cotenantDial dials ip at each port from the co-tenant's namespace (2 s
// each) and says what happened.
func cotenantDial(t *testing.T, cot netNode, ip string, ports []int) map[int]string {
	code := "import socket,sys\nfor p in sys.argv[2:]:\n s=socket.socket(); s.settimeout(2)\n try:\n  s.connect((sys.argv[1], int(p))); print(p, 'connected')\n" +
		" except Exception as e:\n  print(p, type(e).__name__)\n s.close()\n"
	args := []string{"netns", "exec", cot.ns, "/usr/bin/python3", "-c", code, ip}
	for _, p := range ports {
		args = append(args, fmt.Sprint(p))
	}
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("co-tenant dial: %v\n%s", err, out)
	}
	got := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var p int
		var what string
		if n, _ := fmt.Sscan(l, &p, &what); n == 2 {
			got[p] = what
		}
	}
	return got
}
