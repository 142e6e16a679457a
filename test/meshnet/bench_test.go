package meshnet

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchPeerEnv makes this test binary one end of the bare reference: a
// plain Go TLS 1.3 stream between the two nodes' namespaces ("server
// PORT" or "client ADDR"), moving benchBytes each way at once.
const benchPeerEnv = "RVMESHNET_BENCH"

const benchBytes = 64 << 20 // a 64 MiB all_reduce's payload

func runBenchPeer() int {
	role, arg, _ := strings.Cut(os.Getenv(benchPeerEnv), " ")
	dir := os.Getenv("RVMESHNET_DIR")
	kp, err := tls.LoadX509KeyPair(dir+"/node1.crt", dir+"/node1.key")
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	var c net.Conn
	if role == "server" {
		l, err := tls.Listen("tcp", ":"+arg, &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS13})
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		fmt.Println("READY")
		if c, err = l.Accept(); err != nil {
			return 1
		}
	} else {
		if c, err = tls.Dial("tcp", arg, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}); err != nil {
			fmt.Println("ERR", err)
			return 1
		}
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 256<<10)
		for sent := 0; sent < benchBytes; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if _, err := io.CopyN(io.Discard, c, benchBytes); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	if err := <-done; err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Println("SECONDS", time.Since(start).Seconds())
	c.Close()
	return 0
}

// bareStream is one run of the reference: seconds for both directions.
func bareStream(b *testing.B, c *cluster, port int) float64 {
	b.Helper()
	env := append(os.Environ(), "RVMESHNET_DIR="+c.dir)
	srv := exec.Command("ip", "netns", "exec", c.net.nodes[1].ns, os.Args[0])
	srv.Env = append(env, benchPeerEnv+"=server "+strconv.Itoa(port))
	out, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Wait()
	line := make([]byte, 6)
	io.ReadFull(out, line)
	cli := exec.Command("ip", "netns", "exec", c.net.nodes[0].ns, os.Args[0])
	cli.Env = append(env, benchPeerEnv+"=client "+fmt.Sprintf("%s:%d", c.net.nodes[1].public, port))
	res, err := cli.Output()
	s, ok := strings.CutPrefix(strings.TrimSpace(string(res)), "SECONDS ")
	if err != nil || !ok {
		b.Fatalf("bare stream: %v %s", err, res)
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// cpuSeconds is a process's user+system CPU time so far.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100 // USER_HZ
}

// BenchmarkAllReduceThroughMesh is issue 30's figure: a 64 MiB gloo
// all_reduce between two nodes through their meshes (the median of three,
// after a warm-up) against the bare reference in the same run (the same
// bytes, each way at once, over one plain Go TLS 1.3 stream between the
// same two namespaces, median of three), and the agents' CPU per GiB the
// ranks sent. Run: go test -run '^$' -bench AllReduce -benchtime 1x ./test/meshnet
func BenchmarkAllReduceThroughMesh(b *testing.B) {
	needTorch(b)
	lib := nativeLib(b)
	c := startCluster(b, newVastNet(b))
	var bare []float64
	for i := range 3 {
		bare = append(bare, bareStream(b, c, c.net.nodes[1].firstPort+20+i))
	}
	slices.Sort(bare)
	cpu0 := cpuSeconds(c.pids[0]) + cpuSeconds(c.pids[1])
	res := c.runRanks(b, lib, true, []int{0, 1}, "bench")
	cpu := cpuSeconds(c.pids[0]) + cpuSeconds(c.pids[1]) - cpu0
	for _, r := range res {
		if !r.OK {
			b.Fatalf("rank %d: %s\n%s", r.Rank, r.Exception, r.raw)
		}
	}
	mesh := max(res[0].Seconds, res[1].Seconds)
	// Each rank sends 64 MiB per all_reduce (two ranks, ring), four of them
	// (a warm-up and three timed): 512 MiB sent in all.
	sentGiB := 2 * 4 * float64(benchBytes) / (1 << 30)
	b.ReportMetric(mesh, "mesh-s")
	b.ReportMetric(bare[1], "bare-tls-s")
	b.ReportMetric(bare[1]/mesh, "throughput-ratio")
	b.ReportMetric(float64(benchBytes)/mesh/(1<<20), "mesh-MiB/s")
	b.ReportMetric(cpu/sentGiB, "agent-cpu-s/GiB")
}
