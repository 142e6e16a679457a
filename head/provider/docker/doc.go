// Package docker is the embedded rental provider that rents "candidates" as
// containers of the local Docker Engine, shaped like vast.ai rentals: the
// SPEC §2 env plus RAYVAST_INSTANCE_ID, RAYVAST_PUBLIC_IP and RAYVAST_PORTS,
// bootloader.sh's text as the command, NET_RAW and NET_ADMIN dropped, a
// private empty /dev/shm, and labels so a restarted head finds its
// containers. It talks to the Engine over /var/run/docker.sock with
// internal/dockerengine (no Docker SDK).
//
// Layout on one machine (vast's network, vastnet.go and nat.go): the
// provider owns a user-defined bridge network rayvast-<cluster> with a fixed
// subnet; the head listens on its gateway IP (`head init --ip <gateway>`);
// each candidate gets a fixed private address there. Its "public IP" comes
// from a second network, rayvast-<cluster>-pub, that no container joins: on
// none of the candidate's interfaces, and routed by this machine to a bridge
// of its own, so nothing leaves the machine. The nftables table ip
// rvdocker_<hash> forwards the candidate's 64 ports (20000–20063, below the
// ephemeral port range) from public IP:port to it (DNAT), makes each of its
// connections to this machine come from its public IP (SNAT), and loops its
// connections to its own public IP back only with NetOptions.Hairpin. With
// NetOptions.PerIP candidates share an IP, each with its own 64 ports. A
// who-am-I DNS responder on the gateway makes the egress check real.
//
// Host ID: every container shares one machine, so the host ID is the
// container name; blocklisting the unsafe demo candidate does not block the
// others.
//
// Knobs from the environment of `head serve` (Options are fixed):
// RAYVAST_DOCKER_IMAGE (default: build or reuse the cached candidate image
// from test/fakeray), RAYVAST_DOCKER_UNSAFE_NODE_TYPES (comma list of node
// types rented with NET_RAW kept, for `head demo`'s refusal),
// RAYVAST_DOCKER_HAIRPIN and RAYVAST_DOCKER_PER_IP (NetOptions).
package docker
