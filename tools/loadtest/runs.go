package main

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// Targets of issue 26, as head/bare ratios measured in one run.
const (
	targetEnrollCPU     = 1.25
	targetHeartbeatCPU  = 1.25
	targetStormHeartP99 = 1.5
)

func run(o options) error {
	per, err := registryMemory(o.regNodes)
	if err != nil {
		return err
	}
	fmt.Printf("registry memory: %.0f B per enrolled node (%d nodes, in process, heap after GC)\n", per, o.regNodes)
	rep := &report{}
	for i, n := range o.storms {
		last := i == len(o.storms)-1
		if err := oneRun(o, i, n, last, rep); err != nil {
			return err
		}
	}
	rep.write(os.Stdout)
	return nil
}

// stormResult is one enrollment storm's figures.
type stormResult struct {
	enrolled int
	wall     time.Duration
	cpu      time.Duration // the server's, user+system
}

func (s stormResult) cpuMsEach() float64 {
	return perEach(float64(s.cpu.Microseconds())/1000, s.enrolled)
}

// storm has every node of g enroll at target (empty: the head's port A) at
// once and measures the serving process pid.
func storm(g *workers, target string, pid int, name string) stormResult {
	cpu0, _ := cpuTime(pid)
	t := time.Now()
	res := g.all(command{Op: "enroll", Target: target})
	wall := time.Since(t)
	cpu1, _ := cpuTime(pid)
	lat, fails := merge(res)
	s := stormResult{enrolled: len(lat), wall: wall, cpu: cpu1 - cpu0}
	fmt.Printf("%s: enrolled %d of %d in %v (answers after p10 %v, p50 %v, p90 %v, last %v); failed %d %s; retries %d\n",
		name, len(lat), g.nodes, wall.Round(time.Millisecond), pct(lat, 10), pct(lat, 50), pct(lat, 90), pct(lat, 100), fails, firstErr(res), retries(res))
	fmt.Printf("%s: CPU %v = %.2f ms per enrollment\n", name, s.cpu.Round(time.Millisecond), s.cpuMsEach())
	return s
}

// oneRun is a fresh head and its bare reference: a storm of n at each,
// the head's first; the last run then heartbeats.
func oneRun(o options, idx, n int, withHeartbeats bool, rep *report) error {
	h, err := startHead(o, idx)
	if err != nil {
		return err
	}
	defer h.close(o.keep)
	bare, err := startBare(h, o.bareChecks)
	if err != nil {
		return err
	}
	defer bare.close()
	extra := 0
	if withHeartbeats {
		extra = o.storm2 // the storm while nodes heartbeat
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
	hs := storm(g1, "", h.pid(), "head")
	gb, err := startWorkers(h, bareNodes(idx, n+extra, n), o.perWorker)
	if err != nil {
		return err
	}
	bs := storm(gb, bare.enrollAddr, bare.pid(), "bare")
	gb.quit()
	fmt.Println(rep.add(comparison{what: fmt.Sprintf("enrollment CPU, storm of %d", n), head: hs.cpuMsEach(), bare: bs.cpuMsEach(),
		unit: "ms", target: targetEnrollCPU}))
	fmt.Println(rep.add(comparison{what: fmt.Sprintf("storm of %d, wall time", n), head: hs.wall.Seconds(), bare: bs.wall.Seconds(), unit: "s"}))
	if !withHeartbeats {
		return nil
	}
	// The bare server's own storm during heartbeats: as many fresh nodes,
	// at addresses after its first storm's.
	return heartbeatPhases(o, h, bare, g1, nodes[n:], bareNodes(idx, 2*n+extra, extra), rss0, rep)
}

func heartbeatPhases(o options, h *head, bare *bareServer, g1 *workers, later, bareLater []node, rss0 int64, rep *report) error {
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
	hper := perEach(float64(hc.Microseconds()), hn)
	bper := perEach(float64(bc.Microseconds()), bn)
	fmt.Printf("ratio head/bare: p50 ×%.2f, p99 ×%.2f\n", ratio(pct(hl, 50), pct(bl, 50)), ratio(pct(hl, 99), pct(bl, 99)))
	fmt.Println(rep.add(comparison{what: "heartbeat CPU", head: hper, bare: bper, unit: "µs", target: targetHeartbeatCPU}))
	fmt.Printf("head RSS %.1f KiB per node (registry, kept-alive connection, buffers)\n", float64(rss(h.pid())-rss0)/1024/float64(g1.nodes))

	if len(later) == 0 {
		return nil
	}
	headLat, bareLat, err := heartbeatsDuringStorm(o, h, bare, g1, later, bareLater)
	if err != nil {
		return err
	}
	fmt.Printf("ratio head/bare during the storm: p50 ×%.2f\n", ratio(pct(headLat, 50), pct(bareLat, 50)))
	fmt.Println(rep.add(comparison{what: fmt.Sprintf("heartbeat p99 while %d enroll at each", len(later)),
		head: ms(pct(headLat, 99)), bare: ms(pct(bareLat, 99)), unit: "ms", target: targetStormHeartP99}))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// heartbeatsDuringStorm has every other enrolled node heartbeat to the
// head and the rest to the bare server, at the same moments, while storm's
// nodes enroll at the head and bareStorm's (as many) at the bare server,
// all at once: each server takes the same storm beside the same heartbeat
// work, at the same moments, with the same noise from the rest of this
// shared machine. The bare server's heartbeats are the reference for what
// a storm costs a server's heartbeats at the least.
func heartbeatsDuringStorm(o options, h *head, bare *bareServer, g1 *workers, storm, bareStorm []node) (headLat, bareLat []int64, err error) {
	g2, err := startWorkers(h, storm, o.perWorker)
	if err != nil {
		return nil, nil, err
	}
	defer g2.quit()
	g3, err := startWorkers(h, bareStorm, o.perWorker)
	if err != nil {
		return nil, nil, err
	}
	defer g3.quit()
	hb := command{Op: "hb", Target: h.portB, Alt: bare.addr, Rate: o.rate, Secs: 1}
	g1.all(hb) // connections open before the storm
	fmt.Printf("\n== heartbeats at %.0f/s, half to the head and half to the bare server, while %d more nodes enroll at each at once\n", o.rate, len(storm))
	var wg sync.WaitGroup
	stormAt := func(name string, g *workers, target string) {
		wg.Go(func() {
			time.Sleep(time.Second)
			t := time.Now()
			r := g.all(command{Op: "enroll", Target: target})
			lat, fails := merge(r)
			fmt.Printf("storm at the %s: enrolled %d of %d in %v, failed %d %s\n", name, len(lat), g.nodes, time.Since(t).Round(time.Millisecond), fails, firstErr(r))
		})
	}
	stormAt("head", g2, "")
	stormAt("bare server", g3, bare.enrollAddr)
	hb.Secs = o.secs
	res := g1.all(hb)
	wg.Wait()
	var alt []result
	for _, r := range res {
		if r.Alt != nil {
			alt = append(alt, *r.Alt)
		}
	}
	headLat = stormSide("head", res)
	bareLat = stormSide("bare", alt)
	return headLat, bareLat, nil
}

// stormSide prints one server's heartbeats during the storm.
func stormSide(name string, res []result) []int64 {
	lat, fails := merge(res)
	fmt.Printf("%s: %d heartbeats during the storm, failed %d %s; p50 %v p99 %v max %v; over %v by second (the storm starts in second 1): %v\n",
		name, len(lat), fails, firstErr(res), pct(lat, 50), pct(lat, 99), pct(lat, 100), slowHeartbeat, slowBySecond(res))
	return lat
}
