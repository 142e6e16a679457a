package raylaunch

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Training libraries pick the address they advertise to other ranks by
// themselves: gloo and NCCL resolve the hostname unless told an interface,
// and where the hostname maps to 127.0.1.1 (Debian's and Ubuntu's
// /etc/hosts) or to nothing, they advertise loopback and the far rank's
// connect is refused. Told the interface that holds the container's
// address, they advertise that address, which the shim answers as the node
// IP (docs/training.md). The mesh carries TCP over IPv4 only, so NCCL is
// kept to its socket transport on IPv4: no InfiniBand/RoCE, no network
// plugin (those would bypass the mesh and fail, or leave it in clear).
// A variable the user set (in the agent's environment) is kept as it is.

// trainingDefaults are the variables Env sets for the mesh and the
// interface iface, in a stable order.
func trainingDefaults(iface string, mesh bool) [][2]string {
	var out [][2]string
	if iface != "" {
		out = append(out,
			[2]string{"GLOO_SOCKET_IFNAME", iface},
			// NCCL matches a prefix ("eth0" would also take eth01); "=" makes
			// it exact (NCCL's env docs: NCCL_SOCKET_IFNAME).
			[2]string{"NCCL_SOCKET_IFNAME", "=" + iface},
			[2]string{"TP_SOCKET_IFNAME", iface}, // tensorpipe (torch.distributed.rpc)
		)
	}
	if mesh {
		out = append(out,
			[2]string{"NCCL_SOCKET_FAMILY", "AF_INET"},
			[2]string{"NCCL_IB_DISABLE", "1"},
			[2]string{"NCCL_NET", "Socket"},
		)
	}
	return out
}

// trainingEnv is what Env adds to kept (Ray's inherited environment): each
// default whose variable kept does not set already.
func trainingEnv(kept []string, iface string, mesh bool) []string {
	set := map[string]bool{}
	for _, kv := range kept {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	var out []string
	for _, d := range trainingDefaults(iface, mesh) {
		if !set[d[0]] {
			out = append(out, d[0]+"="+d[1])
		}
	}
	return out
}

// IfaceOf is the name of this machine's interface that holds addr (the
// container's address toward the head).
func IfaceOf(addr netip.Addr) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, i := range ifs {
		addrs, err := i.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr.Unmap() {
					return i.Name, nil
				}
			}
		}
	}
	return "", fmt.Errorf("no interface holds %s", addr)
}
