package portcheck

import (
	"context"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// BenchmarkCheck64Loopback is one full port check, head and real agent on
// 127.0.0.1, default config: 64 connections, 16 at a time.
func BenchmarkCheck64Loopback(b *testing.B) {
	ports := rvtest.FreePorts(b, "127.0.0.1", 64)
	listenAgent(b, "127.0.0.1", ports, testKey)
	ctx := context.Background()
	for b.Loop() {
		if err := Check(ctx, CheckConfig{}, "127.0.0.1", ports, testKey); err != nil {
			b.Fatal(err)
		}
	}
}
