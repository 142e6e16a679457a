package fakeray

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

var (
	buildOnce sync.Once
	buildErr  error
)

// Dir is this directory (test/fakeray): what tests put on PYTHONPATH.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// BuildNatives compiles the stand-in's native raylet, GCS and core worker
// (build-natives.sh: only what is stale) so `go test` works after a plain
// clone. Once per test binary; the script's renames make concurrent
// binaries safe.
func BuildNatives() error {
	buildOnce.Do(func() {
		out, err := exec.Command("sh", filepath.Join(Dir(), "build-natives.sh")).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build fakeray natives: %w: %s", err, out)
		}
	})
	return buildErr
}
