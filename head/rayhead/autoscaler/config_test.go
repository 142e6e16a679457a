package autoscaler

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/config"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestClusterConfigPassesRaySchema: the Ray cluster config head up writes
// for each example passes check_config.py (Ray's own
// ray-schema.json, validate_config's checks, every key v1 indexes).
func TestClusterConfigPassesRaySchema(t *testing.T) {
	// python3 on PATH first (it may be a pyenv one with the modules), then
	// Debian's, where .ci/run's apt-get puts python3-yaml and -jsonschema.
	var py string
	var err error
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		if py, err = exec.LookPath(name); err != nil {
			continue
		}
		var out []byte
		if out, err = exec.Command(py, "-c", "import yaml, jsonschema").CombinedOutput(); err == nil {
			break
		}
		t.Logf("%s: %s", py, out)
	}
	if err != nil {
		rvtest.Need(t, fmt.Sprintf("python3 with yaml and jsonschema: %v", err))
	}
	for _, ex := range []string{"docker.json", "vast.json"} {
		cfg, err := config.Load(filepath.Join("..", "..", "..", "examples", ex))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		st := &statedir.State{Dir: dir, HeadIP: "198.51.100.1"}
		path, err := WriteConfig(st, cfg, filepath.Join(dir, statedir.AdminSocket))
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(py, "-B", "check_config.py", path).CombinedOutput()
		if err != nil {
			t.Errorf("%s: check_config: %v\n%s", ex, err, out)
		}
		b, _ := os.ReadFile(path)
		for _, want := range []string{`"head_node_type": "head"`, `"disable_node_updaters": true`, `"admin_socket": "` + dir} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s: autoscaler.yaml lacks %s", ex, want)
			}
		}
	}
}
