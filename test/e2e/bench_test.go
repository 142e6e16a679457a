package e2e

import (
	"fmt"
	"testing"
	"time"
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
