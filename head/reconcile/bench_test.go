package reconcile

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// BenchmarkTick: one pass over 2,000 candidates (1,000 ended) of 4 node
// types at their min, firewall sync included (to a fake).
func BenchmarkTick(b *testing.B) {
	cl := &fakeCluster{}
	types := map[string]wire.NodeType{}
	for i := 0; i < 4; i++ {
		types[fmt.Sprintf("t%d", i)] = wire.NodeType{MinWorkers: 250, MaxWorkers: 300}
	}
	for i := 0; i < 2000; i++ {
		c := cand(fmt.Sprintf("c%d", i), fmt.Sprintf("t%d", i%4), wire.StateEnrolled, time.Hour, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		if i%2 == 1 {
			c.State, c.Reason = wire.StateEnded, "deleted"
		}
		cl.cands = append(cl.cands, c)
	}
	l := New(Config{Cluster: cl, Firewall: &fakeFirewall{}, NodeTypes: types, Now: func() time.Time { return t0 }})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Tick(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
