package hostcheck

import (
	"context"
	"testing"
	"time"
)

// BenchmarkRunFakeRoot measures one full Run against a fake container root
// and two local who-am-I servers: what `agent check` costs apart from the
// network round trips to real resolvers.
func BenchmarkRunFakeRoot(b *testing.B) {
	cfg := Config{
		Root:      goodContainer(b),
		PublicIP:  "127.0.0.1",
		Resolvers: []Resolver{whoamiAt(b, OpenDNS, "127.0.0.1", nil), whoamiAt(b, Cloudflare, "127.0.0.2", nil)},
		Timeout:   2 * time.Second,
	}
	for b.Loop() {
		if r := Run(context.Background(), cfg); !r.Checks.OK() {
			b.Fatalf("check failed: %+v", r)
		}
	}
}
