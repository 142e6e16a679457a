// Package docker is the embedded rental provider that rents "candidates" as
// containers of the local Docker Engine, shaped like vast.ai rentals: the
// docs/protocol.md §2 env plus RAYVAST_INSTANCE_ID, RAYVAST_PUBLIC_IP and RAYVAST_PORTS,
// bootloader.sh's text as the command, NET_RAW and NET_ADMIN dropped, a
// private empty /dev/shm, and labels so a restarted head finds its
// containers. It talks to the Engine over /var/run/docker.sock with
// internal/dockerengine (no Docker SDK).
//
// The candidates live on vast's network of the cluster (head/vastnet:
// private addresses, public IPs that are on none of their interfaces, the
// NAT between them). A who-am-I DNS responder on the network's gateway
// makes the egress check real.
//
// Host ID: every container shares one machine, so the host ID is the
// container name; blocklisting the unsafe demo candidate does not block the
// others.
//
// New takes typed Settings (the head parses its config's provider block
// and the RAYVAST_DOCKER_* environment into them) and builds no image: the
// caller builds one with head/candidateimage when the settings name none.
package docker
