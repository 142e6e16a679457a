package enroll

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/internal/wire"
)

// BenchmarkEnroll measures one whole POST /enroll over real TLS: decode,
// claim, checks, a loopback port check of 64 ports (challenge-response),
// node key and certificate, bundle. One client connection is kept alive;
// the candidate is created outside the timer. state=disk adds the fsynced
// state writes (token consumption, node record) a real head does.
//
//	go test -run '^$' -bench Enroll -benchtime 200x ./head/enroll
func BenchmarkEnroll(b *testing.B) {
	b.Run("state=memory", func(b *testing.B) { benchEnroll(b, newHead(b)) })
	b.Run("state=disk", func(b *testing.B) { benchEnroll(b, newHeadAt(b, filepath.Join(b.TempDir(), "state.json"))) })
}

func benchEnroll(b *testing.B, h *testHead) {
	a, err := fakeagent.Start("127.0.6.1", fakeagent.Answer)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	client := fakeagent.Client("127.0.6.1", h.ca.Pool(), nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		inst := fmt.Sprintf("bench-%d", i)
		_, tok, err := h.reg.NewCandidate(wire.CandidateRequest{NodeType: "bench", InstanceID: inst, PublicIP: "127.0.6.1"})
		if err != nil {
			b.Fatal(err)
		}
		req := a.Request(inst, tok.Reveal(), 0)
		b.StartTimer()
		st, body, err := fakeagent.Post(context.Background(), client, h.url+"/enroll", req)
		if err != nil || st != 200 {
			b.Fatalf("enroll: %d %s %v", st, body, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "enrollments/s")
}
