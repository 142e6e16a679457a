// Command loadtest measures the head at fleet scale on one machine (issue
// 11): N simulated nodes, each with its own loopback IP (127.x.y.z), its own
// 64 port-check listeners and, once enrolled, its own kept-alive mTLS
// connection to port B; an enrollment storm; heartbeats at a set rate; and,
// in the same run on the same CPUs, a bare Go server as the reference for
// both: an enrollment's least work on one port (TLS, parse, the 64-port
// check, one certificate) and a heartbeat's on another (mutual TLS, parse,
// answer). It prints figures and head/bare ratios against their targets.
//
//	go build -o /tmp/head ./head && go run ./tools/loadtest --head /tmp/head
//
// The nodes live in worker processes (this binary re-run as "worker"), at
// most --per-worker each: one process's descriptor limit (20,000 here) holds
// 64 listeners for about 300 nodes, and 1,000 nodes need 64,000 at once. A
// node answers the port check with the agent's own listeners
// (internal/portcheck) and closes them once enrolled, as the agent does.
//
// As root the whole run happens in a new network namespace (--netns), away
// from the host's firewall and connection tracking. --pin gives the head
// (and the bare server in its turn) CPU 0 alone and the nodes the others,
// as if the head had its own machine.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

type options struct {
	head       string
	storms     []int
	storm2     int
	rate       float64
	secs       float64
	perWorker  int
	regNodes   int
	bareChecks int
	keep       bool
	cpus       cpus
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(runWorker())
	}
	if len(os.Args) > 1 && os.Args[1] == "bare" {
		os.Exit(runBare(os.Args[2:]))
	}
	var o options
	var storms string
	flag.StringVar(&o.head, "head", "", "head binary (go build -o /tmp/head ./head)")
	flag.StringVar(&storms, "storms", "100,1000,2000", "enrollment storm sizes, each against a fresh head; the last one's nodes then heartbeat")
	flag.IntVar(&o.storm2, "storm-during-heartbeats", 1000, "nodes that enroll at once at the head, and as many at the bare server, while the enrolled ones heartbeat, half of them to the head and half to the bare server")
	flag.Float64Var(&o.rate, "rate", 3333, "heartbeats per second, all nodes together")
	flag.Float64Var(&o.secs, "secs", 10, "length of each heartbeat phase, seconds")
	flag.IntVar(&o.perWorker, "per-worker", 150, "nodes per worker process")
	flag.IntVar(&o.bareChecks, "bare-checks", 16, "port checks at once in the bare enrollment server (the head adapts its own number)")
	flag.IntVar(&o.regNodes, "registry-nodes", 2000, "nodes for the in-process registry memory figure")
	flag.BoolVar(&o.keep, "keep", false, "keep the state dirs")
	pin := flag.Bool("pin", false, "pin the head (and the bare server) to CPU 0 and the simulated nodes to the other CPUs, as if the head had its own machine")
	netns := flag.Bool("netns", true, "run everything in a new network namespace with only loopback (needs root; false: on the host's loopback, with its firewall and connection tracking)")
	flag.Parse()
	if o.head == "" {
		fmt.Fprintln(os.Stderr, "loadtest: --head BINARY is required (go build -o /tmp/head ./head)")
		os.Exit(2)
	}
	for _, s := range strings.Split(storms, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "loadtest: --storms %q\n", storms)
			os.Exit(2)
		}
		o.storms = append(o.storms, n)
	}
	switch {
	case os.Getenv(inNetnsEnv) == "1":
		if err := loopbackUp(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(1)
		}
		fmt.Println("network: a new namespace with only loopback (no host firewall, no connection tracking)")
	case *netns && os.Geteuid() == 0:
		code, err := reexecInNetns()
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
		}
		os.Exit(code)
	case *netns:
		fmt.Fprintln(os.Stderr, "loadtest: --netns needs root; run as root or pass --netns=false")
		os.Exit(2)
	default:
		fmt.Println("network: the host's loopback, through its firewall and connection tracking")
	}
	var err error
	if o.cpus, err = newCPUs(*pin); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err, "(pass --pin=false)")
		os.Exit(2)
	}
	fmt.Println("cpus:", o.cpus)
	if lim, err := raiseNoFile(); err == nil {
		fmt.Printf("descriptor limit %d per process; %d nodes per worker\n", lim, o.perWorker)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}
