package rvtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rayvast/rayvast/internal/rayenv"
)

// Ray versions the tests run: the oldest supported and the newest.
const (
	RayOldest = rayenv.Oldest
	RayNewest = rayenv.Newest
)

var rayMu sync.Mutex // one venv build at a time within a test binary

// RayPython returns the Python of a venv with real Ray of the given version
// (rayenv's cache dir; .ci/run makes both versions first). A missing venv
// is made from the shared wheel folder beside the checkout
// ($RAYVAST_RAY_WHEELS or ../shared/wheels); with neither, the test skips
// loudly (fails when CI=true).
func RayPython(t TB, version string) string {
	t.Helper()
	rayMu.Lock()
	defer rayMu.Unlock()
	dir := rayenv.Dir(version)
	if rayenv.Ready(dir, version) {
		return rayenv.PythonOf(dir)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("ray venv: %v", err)
		return ""
	}
	wheels := rayenv.SharedWheels(root)
	if wheels == "" {
		Need(t, fmt.Sprintf("no venv with Ray %s in %s and no wheel folder to make one ($RAYVAST_RAY_WHEELS or ../shared/wheels)", version, dir))
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	py, err := rayenv.Ensure(ctx, rayenv.Config{Version: version, Wheels: wheels})
	if err != nil {
		t.Fatalf("ray venv: %v", err)
		return ""
	}
	return py
}
