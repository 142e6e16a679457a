// Package rvtest is the one home of test support, in the style of
// tailscale's tstest: a settable clock, a goroutine-safe buffer, free
// ports, the root/CI gate, a wait-for-condition helper, a build of the
// binaries with build.sh's flags, and a CA with a node cert and a loopback
// server for the guest API's HTTPS. Only tests import it; a test keeps it
// out of bin/head and bin/agent.
package rvtest
