package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/rayvast/rayvast/agent/bundle"
	"github.com/rayvast/rayvast/agent/mesh"
	"github.com/rayvast/rayvast/agent/raylaunch"
)

// startMesh opens the node's mesh (agent/mesh): its port of the 64 for
// other agents, and a loopback port for the shim's questions, whose
// address it returns for Ray's environment. Without a mesh port in the
// bundle, or without a shim to steer Ray's connects, there is none (nil,
// ""). A mesh that cannot open is logged and left out: Ray still runs,
// only collective traffic across nodes will not.
func (a *agent) startMesh(b *bundle.Bundle) (*mesh.Mesh, string) {
	if b.MeshPort == 0 || b.Shim == nil {
		return nil, ""
	}
	local, err := containerIP(a.cfg.Head)
	if err != nil {
		a.log.Warn("mesh off: no address of this container toward the head", "err", err)
		return nil, ""
	}
	if a.rayIface, err = raylaunch.IfaceOf(local); err != nil {
		// Training still works where the hostname resolves to the
		// container's address (Docker's /etc/hosts), not where it is
		// 127.0.1.1 or nothing (docs/training.md).
		a.log.Warn("no interface for training libraries to advertise", "addr", local.String(), "err", err)
	}
	peers, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(b.MeshPort)))
	if err != nil {
		a.log.Warn("mesh off: cannot listen on its port", "port", b.MeshPort, "err", err)
		return nil, ""
	}
	ask, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		peers.Close()
		a.log.Warn("mesh off: cannot listen on loopback", "err", err)
		return nil, ""
	}
	kick := a.meshKick
	refresh := func(ctx context.Context) { beatNow(ctx, kick) } // a heartbeat out of turn, and its answer
	m := mesh.New(mesh.Config{Self: b.InstanceID, Cert: b.NodeCert, CA: b.CA, Local: local, MeshPort: b.MeshPort,
		Refresh: refresh, Log: a.log})
	go func() { a.log.Info("mesh stopped", "err", m.ServePeers(peers)) }()
	go func() { a.log.Info("mesh questions stopped", "err", m.ServeLocal(ask)) }()
	a.log.Info("mesh listening", "port", b.MeshPort, "local", ask.Addr().String(), "delivers_to", local.String(), "iface", a.rayIface)
	return m, ask.Addr().String()
}

// containerIP is this container's own address toward the head: where a
// listener bound to the node IP really listens (through the shim), found
// as the shim finds it (a UDP socket "connected" toward the head sends
// nothing; its local address is the answer).
func containerIP(head netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(head, 9)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	ap := c.LocalAddr().(*net.UDPAddr).AddrPort()
	if !ap.Addr().IsValid() || ap.Addr().IsUnspecified() {
		return netip.Addr{}, fmt.Errorf("no local address toward %s", head)
	}
	return ap.Addr().Unmap(), nil
}
