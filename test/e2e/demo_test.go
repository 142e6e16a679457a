package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/demo"
	"github.com/rayvast/rayvast/head/vastnet"
	"github.com/rayvast/rayvast/internal/rayenv"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestDemo runs `head demo` as a user would (with the suite's binaries),
// with real Ray, its default: waits for its summary and the Ray job (a task
// on each node, an object node to node), presses "Ctrl-C" and checks that
// it went as designed and left nothing behind. Its TMPDIR is 60
// characters long (issue 29: from about 20 Ray's dashboard socket path
// outgrew AF_UNIX's 107 bytes and the Ray head never came up).
func TestDemo(t *testing.T) {
	needSuite(t)
	t.Setenv("TMPDIR", longDir(t, 60))
	rayImage(t, rvtest.RayNewest) // the venv and image, built once for the suite
	cluster := fmt.Sprintf("%sdemo-%d", clusterPrefix, time.Now().UnixNano()%1e6)
	t.Cleanup(func() {
		_ = vastnet.Cleanup(context.Background(), suite.eng, func(c string) bool { return c == cluster })
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &rvtest.Buffer{}, &rvtest.Buffer{}
	code := make(chan int, 1)
	go func() {
		code <- demo.Run(ctx, []string{"--cluster", cluster, "--head", suite.head, "--agent", suite.agent,
			"--bootloader", filepath.Join(suite.repo, "bootloader.sh"), "--ray-wheels", rayenv.SharedWheels(suite.repo),
			"--heartbeat-interval", "2", "--timeout", "3m"}, out, errOut)
	}()
	waitFor(t, 6*time.Minute, "the demo's summary", func() (bool, string) {
		select {
		case c := <-code:
			t.Fatalf("demo exited %d before Ctrl-C:\n%s\n%s", c, out.String(), errOut.String())
		default:
		}
		return strings.Contains(out.String(), "Press Ctrl-C"), out.String()
	})
	cancel()
	var got int
	select {
	case got = <-code:
	case <-time.After(time.Minute):
		t.Fatalf("demo did not finish within a minute of Ctrl-C:\n%s", out.String())
	}
	text := out.String()
	t.Logf("demo output:\n%s\nstderr:\n%s", text, errOut.String())
	if got != 0 || !strings.Contains(text, "As designed: a real Ray "+rvtest.RayNewest+" cluster of 2 nodes") {
		t.Errorf("demo exit %d, want 0 and 'As designed: a real Ray %s cluster'", got, rvtest.RayNewest)
	}
	if n := strings.Count(text, "first task ran there"); n != 2 {
		t.Errorf("the job ran a first task on %d nodes, want 2", n)
	}
	if !strings.Contains(text, "20 MiB object made on ") || !strings.Contains(text, ": intact, fetched in ") {
		t.Errorf("the job did not show the object moved between nodes")
	}
	if n := strings.Count(text, "[ok]"); n != 3 {
		t.Errorf("summary has %d [ok] rows, want 3", n)
	}
	if !strings.Contains(text, "· head up (built-in demo config, provider docker)") || !strings.Contains(text, ": real Ray "+rvtest.RayNewest) {
		t.Errorf("the demo did not run head up with its Ray head")
	}
	if !strings.Contains(text, "security") {
		t.Errorf("no security blocklist entry shown")
	}
	cs, err := suite.eng.ListContainers(context.Background(), vastnet.LabelCluster+"="+cluster)
	ns, err2 := suite.eng.ListNetworks(context.Background(), vastnet.LabelCluster+"="+cluster)
	if err != nil || err2 != nil || len(cs) != 0 || len(ns) != 0 {
		t.Errorf("after the demo: %d containers, %d networks left (%v %v)", len(cs), len(ns), err, err2)
	}
}

// TestDemoWithoutShim proves the shim is what makes real Ray work behind
// vast's NAT, and that the demo says so instead of calling it a success:
// with `--shim none` the nodes enroll and `ray start` comes up, but Ray
// cannot reach its own node IP (no hairpin NAT): the cluster job's tasks
// never run there, Ray marks the nodes dead, and the demo ends "Not as
// designed" with exit 1.
func TestDemoWithoutShim(t *testing.T) {
	needSuite(t)
	rayImage(t, rvtest.RayNewest)
	cluster := fmt.Sprintf("%snoshim-%d", clusterPrefix, time.Now().UnixNano()%1e6)
	t.Cleanup(func() {
		_ = vastnet.Cleanup(context.Background(), suite.eng, func(c string) bool { return c == cluster })
	})
	out, errOut := &rvtest.Buffer{}, &rvtest.Buffer{}
	code := demo.Run(context.Background(), []string{"--cluster", cluster, "--head", suite.head, "--agent", suite.agent,
		"--bootloader", filepath.Join(suite.repo, "bootloader.sh"), "--ray-wheels", rayenv.SharedWheels(suite.repo),
		"--heartbeat-interval", "2", "--timeout", "60s", "--no-wait", "--serve-arg=--shim", "--serve-arg=none"}, out, errOut)
	text := out.String()
	t.Logf("demo output:\n%s\nstderr:\n%s", text, errOut.String())
	if code != 1 || !strings.Contains(text, "Not as designed") {
		t.Errorf("demo without the shim: exit %d, want 1 and 'Not as designed'", code)
	}
	if strings.Contains(text, "first task ran there") || strings.Contains(text, "As designed: a real Ray") {
		t.Errorf("a task ran on a node without the shim behind vast's NAT")
	}
	if !strings.Contains(text, "Not as designed") {
		t.Errorf("the demo did not say the cluster failed")
	}
}

// longDir makes a directory whose path is n characters long.
func longDir(t *testing.T, n int) string {
	t.Helper()
	base := t.TempDir()
	if len(base)+2 > n {
		t.Fatalf("temp dir %q already longer than %d", base, n)
	}
	d := filepath.Join(base, strings.Repeat("d", n-len(base)-1))
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}
