package registry

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rayvast/rayvast/internal/wire"
)

// BenchmarkEnrollAtFleetSize is the registry's share of one enrollment
// (create, claim, complete: three committed changes) on a real store that
// already holds size enrolled nodes, 64 enrollments at once: the cost per
// change must not grow with the fleet (the v1 JSON file rewrote everything,
// 22 ms per change at 1,000 nodes).
//
//	go test -run '^$' -bench EnrollAtFleetSize ./head/registry
func BenchmarkEnrollAtFleetSize(b *testing.B) {
	for _, size := range []int{100, 2000} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			r, err := Open(Config{Path: filepath.Join(b.TempDir(), "state.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			enrollMany(b, r, "pre", size)
			b.ResetTimer()
			enrollMany(b, r, "bench", b.N)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "enrollments/s")
		})
	}
}

func enrollMany(b *testing.B, r *Registry, prefix string, n int) {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			inst := fmt.Sprintf("%s-%d", prefix, i)
			ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
			_, tok, err := r.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: inst, PublicIP: ip})
			if err != nil {
				b.Error(err)
				return
			}
			cl, err := r.Claim(inst, ip, tok, testKey)
			if err == nil {
				_, err = r.Complete(cl, Enrolled{Serial: "0123456789abcdef0123456789abcdef"})
			}
			if err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
}
