// Command loadtest measures the head at fleet scale on one machine (issue
// 11): N simulated nodes, each with its own loopback IP (127.x.y.z), its own
// 64 port-check listeners and, once enrolled, its own kept-alive mTLS
// connection to port B; an enrollment storm; heartbeats at a set rate; and,
// in the same run, a bare Go mutual-TLS server as the reference for the
// heartbeat cost. It prints figures and ratios, never pass/fail.
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
	"time"
)

type options struct {
	head      string
	storms    []int
	storm2    int
	rate      float64
	secs      float64
	perWorker int
	regNodes  int
	keep      bool
	cpus      cpus
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
	flag.IntVar(&o.storm2, "storm-during-heartbeats", 1000, "nodes that enroll at once while the enrolled ones heartbeat (twice: heartbeats to the head, then to the bare server)")
	flag.Float64Var(&o.rate, "rate", 3333, "heartbeats per second, all nodes together")
	flag.Float64Var(&o.secs, "secs", 10, "length of each heartbeat phase, seconds")
	flag.IntVar(&o.perWorker, "per-worker", 150, "nodes per worker process")
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

func run(o options) error {
	per, err := registryMemory(o.regNodes)
	if err != nil {
		return err
	}
	fmt.Printf("registry memory: %.0f B per enrolled node (%d nodes, in process, heap after GC)\n", per, o.regNodes)
	for i, n := range o.storms {
		last := i == len(o.storms)-1
		if err := oneRun(o, i, n, last); err != nil {
			return err
		}
	}
	return nil
}

func oneRun(o options, idx, n int, withHeartbeats bool) error {
	h, err := startHead(o, idx)
	if err != nil {
		return err
	}
	defer h.close(o.keep)
	extra := 0
	if withHeartbeats {
		extra = 2 * o.storm2 // one storm with heartbeats to the head, one to the bare server
	}
	t0 := time.Now()
	nodes, err := h.candidates(idx, n+extra)
	if err != nil {
		return err
	}
	fmt.Printf("\n== storm of %d: %d candidates created in %v (%.0f/s)\n", n, len(nodes), time.Since(t0).Round(time.Millisecond), float64(len(nodes))/time.Since(t0).Seconds())
	g1, err := startWorkers(h, nodes[:n], o.perWorker)
	if err != nil {
		return err
	}
	defer g1.quit()
	rss0 := rss(h.pid())
	cpu0, _ := cpuTime(h.pid())
	t1 := time.Now()
	res := g1.all(command{Op: "enroll"})
	wall := time.Since(t1)
	cpu1, _ := cpuTime(h.pid())
	lat, fails := merge(res)
	fmt.Printf("enrolled %d of %d in %v (answers after p10 %v, p50 %v, p90 %v, last %v); failed %d %s; retries %d\n",
		len(lat), n, wall.Round(time.Millisecond), pct(lat, 10), pct(lat, 50), pct(lat, 90), pct(lat, 100), fails, firstErr(res), retries(res))
	fmt.Printf("head CPU %v = %.2f ms per enrollment\n", (cpu1 - cpu0).Round(time.Millisecond), float64((cpu1-cpu0).Microseconds())/1000/float64(max(1, len(lat))))
	if !withHeartbeats {
		return nil
	}
	return heartbeatPhases(o, h, g1, nodes[n:], rss0)
}

func heartbeatPhases(o options, h *head, g1 *workers, later []node, rss0 int64) error {
	bare, err := startBare(h)
	if err != nil {
		return err
	}
	defer bare.close()
	warm := command{Op: "hb", Rate: o.rate, Secs: 2}
	phase := func(name, target string, pid int) ([]int64, time.Duration, int) {
		w := warm
		w.Target = target
		g1.all(w) // handshakes and first requests, not measured
		c0, _ := cpuTime(pid)
		res := g1.all(command{Op: "hb", Target: target, Rate: o.rate, Secs: o.secs})
		c1, _ := cpuTime(pid)
		lat, fails := merge(res)
		fmt.Printf("%s: %d heartbeats in %.0f s (%.0f/s), failed %d %s; p50 %v p99 %v; CPU %.1f µs per heartbeat\n",
			name, len(lat), o.secs, float64(len(lat))/o.secs, fails, firstErr(res), pct(lat, 50), pct(lat, 99),
			float64((c1-c0).Microseconds())/float64(max(1, len(lat))))
		return lat, c1 - c0, len(lat)
	}
	fmt.Printf("\n== heartbeats at %.0f/s from %d kept-alive mTLS connections\n", o.rate, g1.nodes)
	hl, hc, hn := phase("head port B", h.portB, h.pid())
	bl, bc, bn := phase("bare mTLS  ", bare.addr, bare.pid())
	phase("head again ", h.portB, h.pid()) // order effects: the head right after its storm, then after the bare server
	hper := float64(hc.Microseconds()) / float64(max(1, hn))
	bper := float64(bc.Microseconds()) / float64(max(1, bn))
	fmt.Printf("ratio head/bare: CPU per heartbeat ×%.2f, p50 ×%.2f, p99 ×%.2f\n", hper/max(bper, 1e-9),
		ratio(pct(hl, 50), pct(bl, 50)), ratio(pct(hl, 99), pct(bl, 99)))
	fmt.Printf("head RSS %.1f KiB per node (registry, kept-alive connection, buffers)\n", float64(rss(h.pid())-rss0)/1024/float64(g1.nodes))

	if len(later) < 2 {
		return nil
	}
	half := len(later) / 2
	headLat, err := heartbeatsDuringStorm(o, h, g1, later[:half], h.portB, "head")
	if err != nil {
		return err
	}
	bareLat, err := heartbeatsDuringStorm(o, h, g1, later[half:], bare.addr, "bare mTLS server")
	if err != nil {
		return err
	}
	fmt.Printf("ratio head/bare during a storm: p50 ×%.2f, p99 ×%.2f\n",
		ratio(pct(headLat, 50), pct(bareLat, 50)), ratio(pct(headLat, 99), pct(bareLat, 99)))
	return nil
}

// heartbeatsDuringStorm has the enrolled nodes heartbeat to target while
// storm's nodes enroll at the head all at once. With the bare server as
// target, the same storm loads the machine but not the server answering
// the heartbeats: the reference for what the head adds.
func heartbeatsDuringStorm(o options, h *head, g1 *workers, storm []node, target, name string) ([]int64, error) {
	g2, err := startWorkers(h, storm, o.perWorker)
	if err != nil {
		return nil, err
	}
	defer g2.quit()
	g1.all(command{Op: "hb", Target: target, Rate: o.rate, Secs: 1}) // connections open before the storm
	fmt.Printf("\n== heartbeats at %.0f/s to the %s while %d more nodes enroll at the head at once\n", o.rate, name, len(storm))
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Second)
		t := time.Now()
		r := g2.all(command{Op: "enroll"})
		lat, fails := merge(r)
		fmt.Printf("storm: enrolled %d of %d in %v, failed %d %s\n", len(lat), len(storm), time.Since(t).Round(time.Millisecond), fails, firstErr(r))
	}()
	res := g1.all(command{Op: "hb", Target: target, Rate: o.rate, Secs: o.secs})
	lat, fails := merge(res)
	<-done
	fmt.Printf("heartbeats during the storm: %d, failed %d %s; p50 %v p99 %v max %v\n", len(lat), fails, firstErr(res), pct(lat, 50), pct(lat, 99), pct(lat, 100))
	fmt.Printf("heartbeats over %v by second (the storm starts in second 1): %v\n", slowHeartbeat, slowBySecond(res))
	return lat, nil
}
