package portcheck

import "net"

// listenConfig opens the agent's 64 listeners without TCP keep-alive: a
// connection lives for one exchange, and keep-alive costs four setsockopt
// calls per accepted connection (with the head's four, 8 of 30 syscalls
// per port; strace -c of BenchmarkCheck64Loopback). TCP_DEFER_ACCEPT was
// tried too and changed neither the syscall count nor the CPU.
var listenConfig = net.ListenConfig{KeepAlive: -1}
