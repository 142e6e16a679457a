// Package agentflow is the end-to-end test of a candidate's life (issue 3,
// "Done means"): the real head and agent binaries, bootloader.sh, and the
// stand-in Ray of test/fakeray, with the candidate sandboxed as close to a
// vast container as one machine allows: its own network namespace (a veth
// pair to the head), its own PID namespace with the agent as PID 1, a
// private empty /dev/shm, and no NET_RAW/NET_ADMIN. It needs root.
package agentflow
