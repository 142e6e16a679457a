package nodeapi

import (
	"context"
	"testing"

	"github.com/rayvast/rayvast/head/internal/fakeagent"
)

// BenchmarkHeartbeat measures POST /heartbeat over one kept-alive mutual
// TLS connection: per-request certificate verification, registry checks,
// decode, record, answer.
//
//	go test -run '^$' -bench Heartbeat ./head/nodeapi
func BenchmarkHeartbeat(b *testing.B) {
	p := newPortB(b)
	cert, _ := p.enroll(b, "i1", "127.0.3.1")
	c := fakeagent.Client("127.0.3.1", p.ca.Pool(), &cert)
	body := hb("i1")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body.Seq = int64(i)
		st, out, err := fakeagent.Post(context.Background(), c, p.url+"/heartbeat", body)
		if err != nil || st != 200 {
			b.Fatalf("heartbeat: %d %s %v", st, out, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
}

// BenchmarkHeartbeatParallel is many nodes' worth of heartbeats at once,
// each goroutine on its own kept-alive connection.
func BenchmarkHeartbeatParallel(b *testing.B) {
	p := newPortB(b)
	cert, _ := p.enroll(b, "i1", "127.0.3.1")
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := fakeagent.Client("127.0.3.1", p.ca.Pool(), &cert)
		body := hb("i1")
		for pb.Next() {
			st, out, err := fakeagent.Post(context.Background(), c, p.url+"/heartbeat", body)
			if err != nil || st != 200 {
				b.Errorf("heartbeat: %d %s %v", st, out, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "heartbeats/s")
}
