// Package docker is the embedded rental provider that rents "candidates" as
// containers of the local Docker Engine, shaped like vast.ai rentals: the
// SPEC §2 env plus RAYVAST_INSTANCE_ID, RAYVAST_PUBLIC_IP and RAYVAST_PORTS,
// bootloader.sh's text as the command, NET_RAW and NET_ADMIN dropped, a
// private empty /dev/shm, and labels so a restarted head finds its
// containers. It talks to the Engine over /var/run/docker.sock with
// internal/dockerengine (no Docker SDK).
//
// Layout on one machine: the provider owns a user-defined bridge network
// rayvast-<cluster> with a fixed subnet; the head listens on its gateway IP
// (`head init --ip <gateway>`); each candidate gets a fixed address in that
// subnet, which is its "public IP" (the head sees it as the source of every
// connection: no NAT between a bridge and its gateway), and 64 ports
// 20000–20063 (below the ephemeral port range) (inside = outside: nothing is published). A who-am-I DNS
// responder on the gateway makes the egress check real.
//
// Host ID: every container shares one machine, so the host ID is the
// container name; blocklisting the unsafe demo candidate does not block the
// others.
//
// Knobs from the environment of `head serve` (Options are fixed):
// RAYVAST_DOCKER_IMAGE (default: build or reuse the cached candidate image
// from test/fakeray) and RAYVAST_DOCKER_UNSAFE_NODE_TYPES (comma list of node
// types rented with NET_RAW kept, for `head demo`'s refusal).
package docker
