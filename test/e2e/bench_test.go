package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// BenchmarkEnroll measures a candidate's way from POST /v1/candidates to an
// enrolled node with Ray running: container create and start, bootloader,
// agent download, host checks, enrollment with the 64-port check, Ray's
// start. go test -run X -bench Enroll ./test/e2e
func BenchmarkEnroll(b *testing.B) {
	c := newCluster(b, "docker")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		created := c.createCandidate(safeType)
		waitFor(b, 2*time.Minute, "enrollment", func() (bool, string) {
			cd := c.candidate(created.CandidateID)
			n, ok := c.node(cd.InstanceID)
			return ok && n.Ray.State == "running", fmt.Sprintf("%+v", cd)
		})
		b.StopTimer()
		if _, err := c.deleteCandidate(created.CandidateID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkRealRayFirstTask measures a candidate's way with real Ray, from
// POST /v1/candidates to the first task that ran on the new node (the
// cluster job through `head run`): everything BenchmarkEnroll covers, then
// Ray joining the cluster and starting a worker.
// go test -run X -bench RealRayFirstTask -benchtime 3x ./test/e2e
func BenchmarkRealRayFirstTask(b *testing.B) {
	c := startRayClusterMinMax(b, rvtest.RayNewest, 0, 1)
	waitFor(b, time.Minute, "head up's admin API", func() (bool, string) {
		_, err := c.admin.Candidates(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		created, err := c.admin.Create(context.Background(), wire.CandidateRequest{NodeType: safeType})
		if err != nil {
			b.Fatal(err)
		}
		var ip string
		waitFor(b, time.Minute, "the candidate's public IP", func() (bool, string) {
			cands, _ := c.admin.Candidates(context.Background())
			for _, cd := range cands {
				if cd.CandidateID == created.CandidateID {
					ip = cd.PublicIP
				}
			}
			return ip != "", "not rented yet"
		})
		if res, out := c.job(1, 3*time.Minute, ip); !res.OK {
			b.Fatalf("job: %s", out)
		}
		b.StopTimer()
		if err := c.admin.End(context.Background(), created.CandidateID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
