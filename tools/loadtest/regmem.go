package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"

	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// registryMemory enrolls n nodes in an in-process registry on a real store
// and returns the heap it holds per node (after GC, with the store's pages
// outside the Go heap, as they are in the head).
func registryMemory(n int) (float64, error) {
	dir, err := os.MkdirTemp("", "rayvast-regmem-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	r, err := registry.Open(registry.Config{Path: filepath.Join(dir, "state.db")})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	before := heap()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	key := secret.NewBytes(make([]byte, 32))
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			inst, ip := "mem-"+strconv.Itoa(i), nodeIP(200, i)
			_, tok, err := r.NewCandidate(wire.CandidateRequest{NodeType: "cpu", InstanceID: inst, PublicIP: ip, HostID: "host-" + inst})
			if err == nil {
				var cl *registry.Claim
				if cl, err = r.Claim(inst, ip, tok, key); err == nil {
					_, err = r.Complete(cl, registry.Enrolled{Serial: "0123456789abcdef0123456789abcdef", GuestAPIPort: 40000})
				}
			}
			if err == nil {
				_, err = r.Heartbeat(wire.Heartbeat{Version: 2, InstanceID: inst, Seq: 1, Ray: wire.RayStatus{State: wire.RayRunning, PID: 7}})
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, err
		}
	}
	after := heap()
	runtime.KeepAlive(r)
	return float64(after-before) / float64(n), nil
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
