package registry

import "github.com/rayvast/rayvast/internal/wire"

// LiveNodeOnIP returns a live node (enrolled or lost: its Ray may still
// run) other than instance except whose public IP is ip, for decision
// step 7a (shared_ip): Ray keys state by node IP, so two nodes behind one
// IP break it. A node of the same instance is the same machine
// re-enrolling, not a neighbour.
func (r *Registry) LiveNodeOnIP(ip, except string) (wire.Node, bool) {
	ip = canonIP(ip)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nodes {
		if n.State != wire.StateEnded && n.InstanceID != except && canonIP(n.PublicIP) == ip {
			return copyNode(n), true
		}
	}
	return wire.Node{}, false
}
