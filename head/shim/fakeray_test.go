package shim

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// fakerayRecord is what test/fakeray (the faithful stand-in Ray) records.
type fakerayRecord struct {
	Started  bool     `json:"started"`
	Problems []string `json:"problems"`
	Error    string   `json:"error"`
}

// TestFakerayInVastNet runs the stand-in Ray's whole process tree (Python
// agents, native raylet and core workers) in vastNet: without the shim it
// has problems and exits 1, with the shim head ships it starts clean.
func TestFakerayInVastNet(t *testing.T) {
	needRoot(t, "unshare", "ip")
	needPython(t)
	fakeray, err := filepath.Abs("../../test/fakeray")
	if err != nil {
		t.Fatal(err)
	}
	natives := filepath.Join(fakeray, "build-natives.sh")
	if _, err := os.Stat(natives); err != nil {
		t.Skipf("SKIP!!! test/fakeray has no native process tree (%v)", err)
	}
	if out, err := exec.Command("sh", natives).CombinedOutput(); err != nil {
		t.Fatalf("fakeray natives: %v\n%s", err, out)
	}
	builtIn := t.TempDir()
	content, libs := Default()
	if len(libs) == 0 {
		content, err = Assemble([][]byte{mustRead(t, buildNative(t, "native"))})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(builtIn, Name), content, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, pythonPath string
		wantStarted      bool
	}{
		{"without the shim", fakeray, false},
		{"with the shim", builtIn + ":" + fakeray, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, code := runFakeray(t, c.pythonPath)
			if rec.Started != c.wantStarted || (len(rec.Problems) == 0) != c.wantStarted || rec.Error != "" {
				t.Errorf("started %v, problems %q, error %q; want started %v", rec.Started, rec.Problems, rec.Error, c.wantStarted)
			}
			if code != 1 { // Ray's exit after SIGTERM, or after a child's death
				t.Errorf("ray start exited %d, want 1", code)
			}
		})
	}
}

// runFakeray starts the stand-in in vastNet, waits until it has started or
// exited, stops it with SIGTERM, and returns its record and exit code.
func runFakeray(t *testing.T, pythonPath string) (fakerayRecord, int) {
	t.Helper()
	tmp := t.TempDir()
	token, record := filepath.Join(tmp, "token"), filepath.Join(tmp, "record.json")
	if err := os.WriteFile(token, []byte("shim-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	temp, err := os.MkdirTemp("", "sh") // short: Ray's AF_UNIX sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(temp)
	argv := append(append([]string{}, rayStartArgv...), "--temp-dir="+temp, "--node-name=c-1")
	cmd := exec.Command("unshare", append([]string{"-n", "sh", "-c", vastNet, "sh"}, argv...)...)
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH=" + pythonPath,
		"FAKERAY_RECORD=" + record, "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN_PATH=" + token}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	var rec fakerayRecord
	rvtest.Until(45*time.Second, func() bool {
		exited := false
		select {
		case <-done:
			exited = true
		default:
		}
		if b, err := os.ReadFile(record); err == nil {
			rec = fakerayRecord{}
			json.Unmarshal(b, &rec) // replaced atomically: whole or absent
		}
		return exited || rec.Started
	})
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("ray start ignored SIGTERM\n%s", out.String())
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("no record: %v\n%s", err, out.String())
	}
	rec = fakerayRecord{}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	t.Logf("exit %d, started %v, problems %q\n%s", cmd.ProcessState.ExitCode(), rec.Started, rec.Problems, out.String())
	return rec, cmd.ProcessState.ExitCode()
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
