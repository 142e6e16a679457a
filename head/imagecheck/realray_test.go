package imagecheck

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rayenv"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestRealRayVersion checks the candidate image with real Ray (the newest
// tested release, built as the e2e builds it, so its cached image is
// reused) against a config naming it (passes) and one naming the oldest
// (the ray row fails with enrollment's reason).
func TestRealRayVersion(t *testing.T) {
	rvtest.NeedDocker(t)
	eng := dockerengine.New("")
	python := rvtest.RayPython(t, rvtest.RayNewest)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	img, err := candidateimage.Build(ctx, candidateimage.Config{Engine: eng, RayVersion: rvtest.RayNewest,
		RayWheels: rayenv.SharedWheels(rvtest.ModuleRoot(t)), RayVenvDir: filepath.Dir(filepath.Dir(python))})
	if err != nil {
		t.Fatalf("image with Ray %s: %v", rvtest.RayNewest, err)
	}
	t.Logf("image %s ready in %v", img, time.Since(start).Round(time.Millisecond))
	for _, want := range []string{rvtest.RayNewest, rvtest.RayOldest} {
		res, err := Run(ctx, Config{Engine: eng, Image: img, RayVersion: want})
		if err != nil {
			t.Fatal(err)
		}
		ray := res.Get("ray")
		t.Logf("ray.version %s: %s %s (%v)", want, ray.Verdict, ray.Detail, res.Took.Round(time.Millisecond))
		switch {
		case want == rvtest.RayNewest && (!res.OK() || ray.Verdict != OK):
			t.Errorf("config naming the image's Ray %s: %+v", want, res.Checks)
		case want != rvtest.RayNewest && !strings.Contains(ray.Detail, "ray "+rvtest.RayNewest+" is not the cluster's ray.version "+want):
			t.Errorf("config naming Ray %s: ray row %s %q", want, ray.Verdict, ray.Detail)
		}
	}
}
