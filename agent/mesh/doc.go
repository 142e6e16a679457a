// Package mesh carries the collective traffic of a node's Ray processes
// (torch.distributed's TCPStore, gloo and NCCL sockets, Ray's collective
// library, Ray Train's setup) to the other nodes of the cluster, encrypted
// and for the cluster alone (docs/protocol.md §9 "Collective traffic", issue 30).
//
// Why: that traffic listens on ports the kernel picks, none of them one of
// the 64 that vast forwards, and it is unauthenticated by design (pytorch's
// SECURITY.md: whoever reaches a TCPStore or a gloo pair can run code), so
// opening ports would not do; and co-tenants share a node's public IP, so
// no source-address filter tells the cluster from a stranger.
//
// How: the shim's native library (head/shim/native) sends a Ray process's
// connect to another node's public IP, on a port outside that node's 64,
// to this agent on loopback; the agent opens a mutual-TLS 1.3 stream to
// that node's agent on its mesh port (one of its 64), both sides proving
// themselves with their node certificates from the cluster CA, each
// accepting only a certificate naming a live member as the head last
// listed them; the far agent connects to the port on its container's own
// address, and the two agents copy bytes both ways. A process sees an
// ordinary connected socket; nothing it sends crosses the network in
// plaintext. The shim also makes gloo and NCCL advertise the public IP
// (getsockname on a listener bound to the container's IP answers the node
// IP), and sends connects to the node's own IP to the container's IP.
//
// The local question (shim → agent, on 127.0.0.1, one line each way):
//
//	RVMESH1 <ipv4> <port>\n
//	D\n            not a mesh destination: connect directly
//	C\n            connected: the socket now carries the stream
//	E <errno>\n    the far side's answer (e.g. 111, ECONNREFUSED)
//
// Between agents (after the TLS handshake, ALPN "rayvast-mesh/1"): the
// dialer sends "<port>\n", the far agent answers "C\n" or "E <errno>\n",
// then bytes flow; each side's end of writing (TLS close_notify) is passed
// on as a half-close, a reset as a close.
package mesh
