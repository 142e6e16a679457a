package raylaunch

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestTrainingEnv: with the mesh on and the interface known, Ray's
// environment tells gloo, NCCL and tensorpipe to advertise that interface
// (NCCL's match exact, "="), keeps NCCL on IPv4 sockets (no IB, no net
// plugin: the mesh carries TCP/IPv4 only); a variable the user set in the
// agent's environment stays as set, once; without the mesh, the NCCL
// transport is not forced, and without an interface no *_IFNAME is set.
func TestTrainingEnv(t *testing.T) {
	all := []string{"GLOO_SOCKET_IFNAME=eth0", "NCCL_SOCKET_IFNAME==eth0", "TP_SOCKET_IFNAME=eth0",
		"NCCL_SOCKET_FAMILY=AF_INET", "NCCL_IB_DISABLE=1", "NCCL_NET=Socket"}
	for _, c := range []struct {
		name        string
		env         []string
		iface, mesh string
		want, never []string
	}{
		{"mesh and interface", nil, "eth0", "127.0.0.1:4000", all, nil},
		{"the user's choice kept", []string{"GLOO_SOCKET_IFNAME=ens5", "NCCL_IB_DISABLE=0", "NCCL_NET=IB"}, "eth0", "127.0.0.1:4000",
			[]string{"GLOO_SOCKET_IFNAME=ens5", "NCCL_IB_DISABLE=0", "NCCL_NET=IB", "TP_SOCKET_IFNAME=eth0"},
			[]string{"GLOO_SOCKET_IFNAME=eth0", "NCCL_IB_DISABLE=1", "NCCL_NET=Socket"}},
		{"no mesh: no NCCL transport forced", nil, "eth0", "", all[:3], all[3:]},
		{"no interface: no IFNAME", nil, "", "127.0.0.1:4000", all[3:], all[:3]},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := params()
			p.Env = append(p.Env, c.env...)
			p.Iface, p.MeshAddr = c.iface, c.mesh
			_, env := Command(p)
			for _, w := range c.want {
				if !slices.Contains(env, w) {
					t.Errorf("%q missing from %q", w, env)
				}
			}
			for _, n := range c.never {
				if slices.Contains(env, n) {
					t.Errorf("%q set in %q", n, env)
				}
			}
			for _, d := range trainingDefaults("eth0", true) {
				if n := countPrefix(env, d[0]+"="); n > 1 {
					t.Errorf("%s set %d times", d[0], n)
				}
			}
		})
	}
}

// TestIfaceOf finds the interface of a real address (loopback's) and
// fails clearly for an address no interface holds.
func TestIfaceOf(t *testing.T) {
	name, err := IfaceOf(netip.MustParseAddr("127.0.0.1"))
	if err != nil || name != "lo" {
		t.Errorf("IfaceOf(127.0.0.1) = %q, %v; want lo", name, err)
	}
	if _, err := IfaceOf(netip.MustParseAddr("203.0.113.77")); err == nil || !strings.Contains(err.Error(), "203.0.113.77") {
		t.Errorf("IfaceOf(an address of no interface): %v", err)
	}
}

// TestGCSWaitEnv: the node's Ray waits GCSReconnectS for a restarting GCS
// (Ray's 60 s default would be kept without it), and a value the user set
// in the agent's environment stays the only one.
func TestGCSWaitEnv(t *testing.T) {
	const name = "RAY_gcs_rpc_server_reconnect_timeout_s"
	_, env := Command(params())
	if !slices.Contains(env, name+"="+GCSReconnectS) {
		t.Errorf("%s=%s missing from %q", name, GCSReconnectS, env)
	}
	p := params()
	p.Env = append(p.Env, name+"=300")
	_, env = Command(p)
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			n++
			if kv != name+"=300" {
				t.Errorf("the user's %s=300 replaced by %q", name, kv)
			}
		}
	}
	if n != 1 {
		t.Errorf("%s set %d times in %q, want once", name, n, env)
	}
}
