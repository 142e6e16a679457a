// Package meshnet tests the mesh (agent/mesh with the shim's native
// library) with real torch.distributed (Debian's python3-torch, gloo)
// between two rentals on vast's network rebuilt in network namespaces the
// test makes: each node's public IP on no interface, its 64 ports
// forwarded by a router namespace (DNAT), its connections leaving from
// its public IP (SNAT), no hairpin, and no route between the nodes'
// private addresses (on vast they sit on different hosts). Each node runs
// a real mesh (this test binary, re-executed in the node's namespace) and
// torch ranks under the shim's library, as Ray's workers would. Root only.
package meshnet
