package meshnet

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The network: a router namespace joined to each node's namespace (and a
// stranger's) by a veth pair. Public IPs are on no interface; the router
// forwards each node's 64 ports to it (DNAT, not from the node itself: no
// hairpin), rewrites its connections out to its public IP (SNAT), drops
// traffic between private addresses that it did not DNAT, and has no route
// anywhere else: a connect to a port vast does not forward finds no host.
type vastNet struct {
	router string
	nodes  []netNode
	id     string
}

type netNode struct {
	ns, private, public string
	firstPort           int // its 64 ports: firstPort … firstPort+63
	// cotenant: another rental on the host of node 0, behind its public
	// IP and on its bridge (it reaches node 0's private address).
	cotenant bool
}

func (n netNode) ports() string { return fmt.Sprintf("%d-%d", n.firstPort, n.firstPort+63) }

func (n netNode) meshPort() int { return n.firstPort + 7 }

func sh(t testing.TB, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-ec", script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("network setup: %v\n%s\n%s", err, script, out)
	}
}

func newVastNet(t testing.TB) *vastNet {
	t.Helper()
	id := fmt.Sprint(os.Getpid() % 100000)
	v := &vastNet{router: "rvmr" + id, id: id, nodes: []netNode{
		{ns: "rvma" + id, private: "10.201.1.2", public: "203.0.113.11", firstPort: 30000},
		{ns: "rvmb" + id, private: "10.201.2.2", public: "203.0.113.12", firstPort: 31000},
		{ns: "rvms" + id, private: "10.201.3.2", public: "198.51.100.7"}, // the stranger
		{ns: "rvmc" + id, private: "10.201.4.2", public: "203.0.113.11", cotenant: true},
	}}
	t.Cleanup(func() {
		for _, n := range append([]string{v.router}, v.nsNames()...) {
			exec.Command("ip", "netns", "del", n).Run()
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "ip netns add %s\nip -n %s link set lo up\nip netns exec %s sysctl -qw net.ipv4.ip_forward=1\n", v.router, v.router, v.router)
	nft := "table ip vast {\n chain pre { type nat hook prerouting priority -100;\n"
	post := " chain post { type nat hook postrouting priority 100;\n"
	apart := ""
	for i, n := range v.nodes {
		veth := fmt.Sprintf("r%d", i)
		fmt.Fprintf(&b, "ip netns add %[1]s\nip -n %[1]s link set lo up\n", n.ns)
		fmt.Fprintf(&b, "ip -n %s link add %s type veth peer name eth0 netns %s\n", v.router, veth, n.ns)
		fmt.Fprintf(&b, "ip -n %s addr add 10.201.%d.1/24 dev %s\nip -n %s link set %s up\n", v.router, i+1, veth, v.router, veth)
		fmt.Fprintf(&b, "ip -n %s addr add %s/24 dev eth0\nip -n %s link set eth0 up\nip -n %s route add default via 10.201.%d.1\n",
			n.ns, n.private, n.ns, n.ns, i+1)
		if n.firstPort > 0 {
			nft += fmt.Sprintf("  iifname != %q ip daddr %s tcp dport %s dnat to %s\n", veth, n.public, n.ports(), n.private)
		}
		if n.cotenant {
			// Same host, same bridge: node 0's private address directly,
			// anything else out through the shared public IP.
			post += fmt.Sprintf("  oifname != %q ip saddr %s ip daddr != 10.201.0.0/16 snat to %s\n", veth, n.private, n.public)
			apart += fmt.Sprintf(" ip saddr %[1]s ip daddr %[2]s accept; ip saddr %[2]s ip daddr %[1]s accept;", n.private, v.nodes[0].private)
			continue
		}
		post += fmt.Sprintf("  oifname != %q ip saddr %s snat to %s\n", veth, n.private, n.public)
	}
	nft += " }\n" + post + " }\n"
	nft += " chain apart { type filter hook forward priority 0; ct status dnat accept;" + apart + " ip saddr 10.201.0.0/16 ip daddr 10.201.0.0/16 reject; }\n}\n"
	fmt.Fprintf(&b, "ip netns exec %s nft -f - <<'NFT'\n%sNFT\n", v.router, nft)
	sh(t, b.String())
	return v
}

func (v *vastNet) nsNames() []string {
	var out []string
	for _, n := range v.nodes {
		out = append(out, n.ns)
	}
	return out
}
