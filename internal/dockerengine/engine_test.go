package dockerengine

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// engine returns a client for the local Docker Engine, or skips (fails when
// CI=true) when there is none.
func engine(t *testing.T) *Client {
	t.Helper()
	rvtest.NeedDocker(t)
	return New("")
}

// helperImage builds testdata/helper statically and imports it as a
// one-file image; removed at cleanup.
func helperImage(t *testing.T, c *Client) string {
	t.Helper()
	bin := rvtest.Build(t, t.TempDir(), "./internal/dockerengine/testdata/helper")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "helper", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(data)
	tw.Close()
	tag := fmt.Sprintf("t%d", time.Now().UnixNano())
	ctx := context.Background()
	if err := c.ImportImage(ctx, &buf, "rayvast-enginetest", tag, []string{`CMD ["/helper"]`, "ENV HELPER_GREETING=from-image"}); err != nil {
		t.Fatal(err)
	}
	ref := "rayvast-enginetest:" + tag
	t.Cleanup(func() { _ = c.RemoveImage(context.Background(), ref, true) })
	return ref
}

// TestContainerLifecycle proves the calls a provider needs work against the
// real Engine: network with a fixed subnet, a container with a fixed IP,
// labels, dropped capabilities, env, logs, SIGTERM on stop with the exit code
// coming back, list by label, removal, and 404s mapped to ErrNotFound.
func TestContainerLifecycle(t *testing.T) {
	c := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img := helperImage(t, c)
	info, err := c.InspectImage(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(info.Config.Env, " "); !strings.Contains(got, "HELPER_GREETING=from-image") {
		t.Errorf("image env = %q, want the ENV change applied", got)
	}

	label := fmt.Sprintf("rayvast.enginetest=%d", time.Now().UnixNano())
	k, v, _ := strings.Cut(label, "=")
	netName := "rayvast-enginetest-" + v
	netID, err := c.CreateNetwork(ctx, NetworkConfig{Name: netName, CheckDuplicate: true, Labels: map[string]string{k: v}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RemoveNetwork(context.Background(), netID) })
	ni, err := c.InspectNetwork(ctx, netName)
	if err != nil || len(ni.IPAM.Config) == 0 {
		t.Fatalf("inspect network: %v %+v", err, ni)
	}
	if nets, err := c.ListNetworks(ctx, label); err != nil || len(nets) != 1 || nets[0].ID != netID {
		t.Fatalf("list networks by label = %+v, %v; want exactly ours", nets, err)
	}

	name := "rayvast-enginetest-c-" + v
	id, err := c.CreateContainer(ctx, name, ContainerConfig{
		Image:  img,
		Env:    []string{"HELPER_GREETING=from-env"},
		Labels: map[string]string{k: v},
		HostConfig: HostConfig{
			NetworkMode: netName,
			CapDrop:     []string{"NET_RAW", "NET_ADMIN"},
			IpcMode:     "private",
		},
		NetworkingConfig: &NetworkingConfig{EndpointsConfig: map[string]EndpointSettings{netName: {}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RemoveContainer(context.Background(), id, true) })
	if err := c.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	ci, err := c.InspectContainer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !ci.State.Running || ci.NetworkSettings.Networks[netName].IPAddress == "" {
		t.Errorf("inspect: running=%v ip=%q, want running with an IP on %s", ci.State.Running, ci.NetworkSettings.Networks[netName].IPAddress, netName)
	}
	if got := strings.Join(ci.HostConfig.CapDrop, ","); got != "NET_RAW,NET_ADMIN" {
		t.Errorf("CapDrop = %q", got)
	}
	if !bytes.Contains(ci.Raw, []byte("from-env")) {
		t.Errorf("raw inspect lacks the env value")
	}
	list, err := c.ListContainers(ctx, label)
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("list by label = %+v, %v; want exactly ours", list, err)
	}

	// Logs: wait until the helper has written both lines.
	var out, errOut []byte
	for i := 0; i < 100; i++ {
		out, errOut, err = c.ContainerLogs(ctx, id)
		if err == nil && len(out) > 0 && len(errOut) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if string(out) != "hello stdout from-env\n" || string(errOut) != "hello stderr\n" {
		t.Errorf("logs = %q / %q, want the helper's two lines split by stream", out, errOut)
	}
	if out, errOut, err := c.ContainerLogsTail(ctx, id, 1); err != nil || strings.Count(string(out)+string(errOut), "\n") != 1 {
		t.Errorf("logs tail 1 = %q / %q, %v; want one line", out, errOut, err)
	}

	files, err := c.CopyFrom(ctx, id, "/helper")
	if err != nil || len(files["helper"].Data) == 0 || files["helper"].Mode&0o111 == 0 {
		t.Errorf("CopyFrom /helper: %v, %d files, want the executable", err, len(files))
	}
	if _, err := c.CopyFrom(ctx, id, "/nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("CopyFrom missing path: %v, want ErrNotFound", err)
	}

	if err := c.StopContainer(ctx, id, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	code, err := c.WaitContainer(ctx, id)
	if err != nil || code != 7 {
		t.Errorf("wait = %d, %v; want 7 (the helper's SIGTERM exit)", code, err)
	}
	if ci, _ := c.InspectContainer(ctx, id); ci.State.ExitCode != 7 {
		t.Errorf("ExitCode = %d, want 7", ci.State.ExitCode)
	}
	if err := c.RemoveContainer(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InspectContainer(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("inspect removed container: %v, want ErrNotFound", err)
	}
	if err := c.RemoveContainer(ctx, id, true); !errors.Is(err, ErrNotFound) {
		t.Errorf("remove twice: %v, want ErrNotFound", err)
	}
	if err := c.RemoveNetwork(ctx, netID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InspectNetwork(ctx, netID); !errors.Is(err, ErrNotFound) {
		t.Errorf("inspect removed network: %v, want ErrNotFound", err)
	}
}

// TestDemux checks the log frame parser on a hand-built stream.
func TestDemux(t *testing.T) {
	frame := func(stream byte, s string) []byte {
		h := []byte{stream, 0, 0, 0, 0, 0, 0, byte(len(s))}
		return append(h, s...)
	}
	var in []byte
	in = append(in, frame(1, "a")...)
	in = append(in, frame(2, "bb")...)
	in = append(in, frame(1, "c")...)
	out, errOut, err := demux(bytes.NewReader(in))
	if err != nil || string(out) != "ac" || string(errOut) != "bb" {
		t.Errorf("demux = %q, %q, %v; want ac, bb", out, errOut, err)
	}
	if _, _, err := demux(bytes.NewReader(in[:len(in)-1])); err == nil {
		t.Error("truncated frame: no error")
	}
}

// TestVersionLess: the negotiation's comparison.
func TestVersionLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"1.41", "1.44", true}, {"1.41", "1.12", false}, {"1.41", "1.41", false},
		{"1.41", "2.0", true}, {"1.9", "1.10", true}, {"1.41", "", false},
	}
	for _, tt := range tests {
		if got := versionLess(tt.a, tt.b); got != tt.want {
			t.Errorf("versionLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
