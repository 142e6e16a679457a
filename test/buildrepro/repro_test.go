// Package buildrepro proves build.sh is reproducible: the agent's SHA-256 is
// put into every rental (RAYVAST_BOOTSTRAP_SHA256), so anyone rebuilding the
// same source must get the same bytes.
package buildrepro

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

func TestTwoBuildsGiveTheSameBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries twice")
	}
	root := rvtest.ModuleRoot(t)
	var sums [2]map[string][32]byte
	for i := range sums {
		dir := t.TempDir()
		cmd := exec.Command(filepath.Join(root, "build.sh"))
		// A second GOCACHE for the second build, so the cache cannot hide a difference.
		cmd.Env = append(os.Environ(), "BIN="+dir, "GOCACHE="+filepath.Join(t.TempDir(), "cache"))
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build.sh: %v\n%s", err, out)
		} else if !bytes.Contains(out, []byte("agent sha256: ")) {
			t.Errorf("build.sh did not print the agent's SHA-256:\n%s", out)
		}
		sums[i] = map[string][32]byte{}
		for _, name := range []string{"head", "agent"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			sums[i][name] = sha256.Sum256(b)
		}
		// head serves the agent built into it: the same bytes as bin/agent.
		ver, err := exec.Command(filepath.Join(dir, "head"), "version").CombinedOutput()
		agentSum := sums[i]["agent"]
		if err != nil || !bytes.Contains(ver, []byte("agent sha256: "+hex.EncodeToString(agentSum[:])+" (built in)")) {
			t.Errorf("head version (%v) does not name bin/agent's SHA-256 %x as built in:\n%s", err, agentSum, ver)
		}
	}
	for _, name := range []string{"head", "agent"} {
		if sums[0][name] != sums[1][name] {
			t.Errorf("%s differs between two builds: %x vs %x", name, sums[0][name], sums[1][name])
		}
	}
}
