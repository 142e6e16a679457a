// Package vastnet imitates the network of vast.ai rentals on one machine
// with the local Docker Engine, for the docker provider and tools/fakevast
// (SOURCES.md says where each behaviour comes from).
//
// A cluster's network is a user-defined bridge rayvast-<cluster> with a
// fixed subnet; the head listens on its gateway IP (`head init --ip
// <gateway>`); each candidate gets a fixed private address there. Its
// "public IP" comes from a second network, rayvast-<cluster>-pub, that no
// container joins: on none of the candidate's interfaces, and routed by
// this machine to a bridge of its own, so nothing leaves the machine. The
// nftables table ip rvdocker_<hash> forwards the candidate's 64 ports
// (20000–20063, below the ephemeral port range) from public IP:port to it
// (DNAT), makes each of its connections to this machine come from its
// public IP (SNAT), and loops its connections to its own public IP back
// only with Options.Hairpin. With Options.PerIP candidates share an IP,
// each with its own 64 ports. Candidates never reach one another at their
// private addresses, although they share the bridge: on vast they sit on
// different hosts (ip forward rule plus a bridge-family table of the same
// name; see isolationRules).
package vastnet
