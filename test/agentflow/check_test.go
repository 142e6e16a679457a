package agentflow

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/whoami"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestAgentCheck proves `agent check` passes inside the container-like
// sandbox and fails on the bare host (host netns, NET_RAW/NET_ADMIN held),
// printing the checks as JSON either way.
func TestAgentCheck(t *testing.T) {
	rvtest.NeedRoot(t, "ip", "unshare", "capsh")
	_, agent := binaries(t)
	vn := newVethNet(t)
	dns, err := whoami.Start(net.JoinHostPort(vn.HostIP, "0"), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	resolvers := fmt.Sprintf("opendns@%s,cloudflare@%s", dns.Addr(), dns.Addr())

	script := `mount -t tmpfs tmpfs /dev/shm && exec capsh --drop=cap_net_raw,cap_net_admin -- -c 'exec "$0" check --public-ip "$1" --resolvers "$2"' "$1" "$2" "$3"`
	inside := exec.Command("ip", "netns", "exec", vn.NS, "unshare", "--pid", "--fork", "--mount-proc", "--",
		"sh", "-c", script, "sh", agent, vn.NodeIP, resolvers)
	inside.Env = append(os.Environ(), wire.EnvPython+"="+realPython(t), "PYTHONPATH="+filepath.Join(rvtest.ModuleRoot(t), "test", "fakeray"))
	report, code := runCheck(t, inside)
	if code != 0 {
		t.Errorf("agent check in the sandbox: exit %d, report %+v", code, report)
	}
	if c := report.Checks; !c.Capabilities.OK || !c.Netns.OK || !c.Shm.OK || !c.Egress.OK || c.Egress.IP != vn.NodeIP {
		t.Errorf("sandbox checks: %+v", c)
	}
	// The found Python's versions are reported ($RAYVAST_PYTHON, fakeray
	// on PYTHONPATH), and the GPU models as a list (none here).
	if report.RayVersion != "2.53.0" || !strings.HasPrefix(report.PythonVersion, "3.") || report.GPUModels == nil {
		t.Errorf("agent check reports ray_version %q python_version %q gpu_models %v; want 2.53.0, 3.x, []",
			report.RayVersion, report.PythonVersion, report.GPUModels)
	}

	outside := exec.Command(agent, "check", "--public-ip", vn.HostIP, "--resolvers", resolvers)
	report, code = runCheck(t, outside)
	if code != 1 {
		t.Errorf("agent check on the host: exit %d, want 1", code)
	}
	if c := report.Checks; c.Capabilities.OK || c.Netns.OK {
		t.Errorf("host checks passed capabilities or netns: %+v", c)
	}
}

func runCheck(t *testing.T, cmd *exec.Cmd) (wire.CheckReport, int) {
	t.Helper()
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r wire.CheckReport
	if err := wire.Decode(bytesReader(out), wire.MaxBody, &r); err != nil {
		t.Fatalf("agent check printed no report: %v\n%s", err, out)
	}
	return r, code
}
