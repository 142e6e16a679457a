package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestOwnImageAgentBuiltIn (issue 33, the "agent built in" recipe): an
// image made from an image with Ray by adding the agent the head serves at
// /opt/rayvast/agent enrolls, runs Ray and a job's tasks, and never
// fetches the agent (the head's rayvast_agent_downloads_total stays 0):
// the bootloader took the built-in one because its SHA-256 is the pinned
// one (test/bootloader's TestEmbeddedAgent: any other is not run).
func TestOwnImageAgentBuiltIn(t *testing.T) {
	rvtest.NeedRoot(t, "ip", "iptables", "nft")
	version := rvtest.RayNewest
	base, python := rayImage(t, version)
	image := withBuiltInAgent(t, base)
	c := startRayClusterImage(t, version, image, python, 1, 1, nil)
	c.waitRunning(1, 4*time.Minute)
	res, out := c.job(1, 2*time.Minute)
	checkJob(t, res, out, 1, version)
	resp, err := c.admin.HTTP.Get("http://admin/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), "\nrayvast_agent_downloads_total 0\n") {
		t.Errorf("the node fetched the agent though its image holds it:\n%s", m)
	}
}

// withBuiltInAgent is base with the agent the head serves at
// /opt/rayvast/agent, as a user's Dockerfile would `COPY` it there.
func withBuiltInAgent(t *testing.T, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	agent, err := os.ReadFile(suite.agent)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "opt/rayvast/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "opt/rayvast/agent", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(agent))})
	tw.Write(agent)
	tw.Close()
	id, err := suite.eng.CreateContainer(ctx, "", dockerengine.ContainerConfig{Image: base, Cmd: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	defer suite.eng.RemoveContainer(context.Background(), id, true)
	if err := suite.eng.PutArchive(ctx, id, "/", &buf); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("rayvast-e2e-agent-built-in:%d", time.Now().UnixNano()%1e9)
	repo, tag, _ := strings.Cut(name, ":")
	if _, err := suite.eng.Commit(ctx, id, repo, tag, []string{`CMD ["/bin/sh"]`}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { suite.eng.RemoveImage(context.Background(), name, true) })
	return name
}
