package mesh

import (
	"net/netip"
	"slices"

	"github.com/rayvast/rayvast/internal/wire"
)

// member is one node of the membership, parsed.
type member struct {
	id    string
	ip    netip.Addr
	mesh  netip.AddrPort
	ports []int // sorted
}

// view is one membership, immutable once built.
type view struct {
	version string
	byIP    map[netip.Addr]member
	byID    map[string]member
}

// newView parses a membership; a member with an unparsable address or no
// mesh port is left out (it could not be reached, nor recognised).
func newView(m wire.MeshMembers) *view {
	v := &view{version: m.Version, byIP: map[netip.Addr]member{}, byID: map[string]member{}}
	for _, p := range m.Peers {
		ip, err := netip.ParseAddr(p.PublicIP)
		if err != nil || p.MeshPort <= 0 || p.MeshPort > 65535 || !wire.ValidInstanceID(p.InstanceID) {
			continue
		}
		ip = ip.Unmap()
		ports := slices.Clone(p.Ports)
		slices.Sort(ports)
		mb := member{id: p.InstanceID, ip: ip, mesh: netip.AddrPortFrom(ip, uint16(p.MeshPort)), ports: ports}
		v.byIP[ip] = mb
		v.byID[p.InstanceID] = mb
	}
	return v
}

// route is the member a connect to ip:port goes through, if any: a member
// other than this node, on a port outside its 64 (those vast forwards, so
// Ray's own traffic keeps going direct).
func (v *view) route(self string, ip netip.Addr, port int) (member, bool) {
	mb, ok := v.byIP[ip.Unmap()]
	if !ok || mb.id == self {
		return member{}, false
	}
	if _, forwarded := slices.BinarySearch(mb.ports, port); forwarded {
		return member{}, false
	}
	return mb, true
}
