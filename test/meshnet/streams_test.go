package meshnet

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// streamsEnv makes this test binary one end of the many-stream case:
// "hold ADDR" (node 1: accept on ADDR, answer each stream's streamBytes
// with as many, then hold it open) or "open ASK IP PORT" (node 0: for each
// number N read from stdin, open N more streams through the mesh by its
// local question, as the shim does, move streamBytes each way on each,
// print "OPEN total"; all held until stdin closes).
const streamsEnv = "RVMESHNET_STREAMS"

// streamBytes: enough that each stream's copy buffers are all touched (a
// buffer never written costs no RSS), so the figure is a busy stream's.
const streamBytes = 1 << 20

func runStreamsPeer() int {
	f := strings.Fields(os.Getenv(streamsEnv))
	if f[0] == "hold" {
		l, err := net.Listen("tcp", f[1])
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		fmt.Println("READY")
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					io.CopyN(io.Discard, c, streamBytes)
					c.Write(make([]byte, streamBytes))
					io.Copy(io.Discard, c) // held until the far end closes
				}()
			}
		}()
		io.Copy(io.Discard, os.Stdin)
		return 0
	}
	ask, ip, port := f[1], f[2], f[3]
	var held []net.Conn
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		n, _ := strconv.Atoi(in.Text())
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failed error
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := openStream(ask, ip, port)
				if err == nil {
					if _, err = c.Write(make([]byte, streamBytes)); err == nil {
						_, err = io.CopyN(io.Discard, c, streamBytes)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = err
					return
				}
				held = append(held, c)
			}()
		}
		wg.Wait()
		if failed != nil {
			fmt.Println("ERR", failed)
			return 1
		}
		fmt.Println("OPEN", len(held))
	}
	return 0
}

// openStream asks the mesh at ask for a stream to ip:port (the shim's
// local question) and returns the socket that carries it.
func openStream(ask, ip, port string) (net.Conn, error) {
	c, err := net.Dial("tcp", ask)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "RVMESH1 %s %s\n", ip, port)
	ans := make([]byte, 2)
	if _, err := io.ReadFull(c, ans); err != nil || string(ans) != "C\n" {
		c.Close()
		return nil, fmt.Errorf("mesh answered %q: %v", ans, err)
	}
	return c, nil
}

// rssKiB is a process's resident set (VmRSS).
func rssKiB(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb
		}
	}
	return 0
}

// BenchmarkMeshStreamMemory is issue 41's many-stream figure: each
// agent's resident memory per open, busy stream (gloo opens a pair per
// rank pair, NCCL several sockets per peer). 32 streams first (the
// agents' pools and first allocations), then 256 more: the figure is the
// RSS growth over those 256, per stream, for each agent (target ≤ 600 KiB).
// Run: go test -run '^$' -bench StreamMemory -benchtime 1x ./test/meshnet
func BenchmarkMeshStreamMemory(b *testing.B) {
	needTorch(b) // root, ip, nft (torch itself unused)
	rvtest.NeedTools(b, "taskset")
	c := startClusterPinned(b, newVastNet(b), true)
	n1 := c.net.nodes[1]
	const port = 29400 // outside node 1's 64: a stream through the mesh
	hold := inNS(n1.ns, c.cpuOf(1), os.Args[0])
	hold.Env = append(os.Environ(), streamsEnv+"=hold "+n1.private+":"+strconv.Itoa(port))
	hin, _ := hold.StdinPipe()
	hout, _ := hold.StdoutPipe()
	if err := hold.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { hin.Close(); hold.Wait() }()
	if l, _ := bufio.NewReader(hout).ReadString('\n'); l != "READY\n" {
		b.Fatalf("holder: %q", l)
	}
	open := inNS(c.net.nodes[0].ns, c.cpuOf(0), os.Args[0])
	open.Env = append(os.Environ(), fmt.Sprintf("%s=open %s %s %d", streamsEnv, c.ask[0], n1.public, port))
	oin, _ := open.StdinPipe()
	oout, _ := open.StdoutPipe()
	open.Stderr = os.Stderr
	if err := open.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { oin.Close(); open.Wait() }()
	or := bufio.NewReader(oout)
	step := func(n int) [2]float64 {
		fmt.Fprintln(oin, n)
		if l, _ := or.ReadString('\n'); !strings.HasPrefix(l, "OPEN") {
			b.Fatalf("opener: %q\nmesh 0: %s\nmesh 1: %s", l, c.logs[0], c.logs[1])
		}
		time.Sleep(time.Second) // the last copies settle
		return [2]float64{rssKiB(c.pids[0]), rssKiB(c.pids[1])}
	}
	const many = 256
	before := step(32)
	after := step(many)
	per0, per1 := (after[0]-before[0])/many, (after[1]-before[1])/many
	b.Logf("agent RSS: node 0 %.0f → %.0f KiB, node 1 %.0f → %.0f KiB for %d more streams", before[0], after[0], before[1], after[1], many)
	b.ReportMetric(per0, "node0-KiB/stream")
	b.ReportMetric(per1, "node1-KiB/stream")
	b.ReportMetric(max(per0, per1), "max-KiB/stream")
}
