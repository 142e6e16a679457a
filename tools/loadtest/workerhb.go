package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// heartbeats sends rate heartbeats per second, spread over the enrolled
// nodes, each on its own kept-alive connection to target, for d. With
// alt set, every other node heartbeats to alt instead and its figures go
// in the result's Alt: two servers measured at the same moments.
func (w *worker) heartbeats(target, alt string, rate float64, d time.Duration) result {
	var live []*simNode
	for _, s := range w.nodes {
		if s.cert.Certificate != nil {
			live = append(live, s)
		}
	}
	if len(live) == 0 || rate <= 0 {
		return result{Err: "no enrolled nodes"}
	}
	var mu sync.Mutex
	var res, altRes result
	period := time.Duration(float64(len(live)) / rate * float64(time.Second))
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for i, s := range live {
		to, r := target, &res
		if alt != "" && i%2 == 1 {
			to, r = alt, &altRes
		}
		hc := s.hb[to]
		if hc == nil {
			hc = client(s.IP, w.pool, &s.cert, 15*time.Second)
			if s.hb == nil {
				s.hb = map[string]*http.Client{}
			}
			s.hb[to] = hc
		}
		wg.Go(func() {
			// Stagger the nodes over one period so the rate is even.
			t := time.NewTimer(period * time.Duration(i) / time.Duration(len(live)))
			defer t.Stop()
			for seq := int64(1); ; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				t.Reset(period)
				sent := time.Since(start)
				lat, err := heartbeat(hc, "https://"+to+"/heartbeat", s.Instance, seq)
				mu.Lock()
				r.record(sent, lat, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if alt != "" {
		res.Alt = &altRes
	}
	return res
}

// add counts one request: its latency, or its failure.
func (r *result) add(lat time.Duration, err error) {
	if err != nil {
		r.Failures++
		if r.FirstErr == "" {
			r.FirstErr = err.Error()
		}
		return
	}
	r.Latencies = append(r.Latencies, lat.Microseconds())
}

// record adds one heartbeat sent at sent (since the phase began).
func (r *result) record(sent, lat time.Duration, err error) {
	r.add(lat, err)
	if err == nil && lat > slowHeartbeat {
		sec := int(sent / time.Second)
		for len(r.Slow) <= sec {
			r.Slow = append(r.Slow, 0)
		}
		r.Slow[sec]++
	}
}

// slowHeartbeat is the latency counted in result.Slow.
const slowHeartbeat = 100 * time.Millisecond

func heartbeat(hc *http.Client, url, inst string, seq int64) (time.Duration, error) {
	body, _ := json.Marshal(wire.Heartbeat{Version: wire.Version, InstanceID: inst, Seq: seq,
		Ray: wire.RayStatus{State: wire.RayRunning, PID: 42}})
	start := time.Now()
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("heartbeat: %d %s", resp.StatusCode, b)
	}
	return time.Since(start), nil
}
