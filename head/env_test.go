package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/statedir"
)

// TestRunAndEnv proves `head run` gives a command the cluster's env and the
// Ray head's Python first on PATH (so `python` and `ray` are the cluster's),
// never the token's value; `head env` prints the same; and without a Ray
// head both say what to do.
func TestRunAndEnv(t *testing.T) {
	bin := buildHead(t)
	dir := filepath.Join(t.TempDir(), "state")
	if err := statedir.Init(statedir.Options{Dir: dir, IP: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	st, err := statedir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	token := st.ClusterToken.Reveal()

	// Without a Ray head of head up: a clear error, exit 1.
	out, err := exec.Command(bin, "env", "--state", dir).CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "no Ray head of head up") {
		t.Fatalf("head env without a Ray head: exit %d, %s", code, out)
	}

	if _, err := rayhead.FilesOnce(st, time.Now()); err != nil {
		t.Fatal(err)
	}
	venv := filepath.Join(t.TempDir(), "venv", "bin")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(venv, "python"), []byte("#!/bin/sh\necho cluster-python \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rayhead.Status{State: rayhead.Running, Address: "127.0.0.1:6390", Python: filepath.Join(venv, "python")})
	if err := os.WriteFile(filepath.Join(dir, rayhead.StateFile), b, 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "run", "--state", dir, "--", "sh", "-c", `python job.py; env`)
	cmd.Env = append(os.Environ(), "RAY_AUTH_TOKEN=leaked", "PATH=/usr/bin:/bin")
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("head run: %v\n%s", err, got)
	}
	text := string(got)
	for _, want := range []string{"cluster-python job.py\n", "RAY_ADDRESS=127.0.0.1:6390\n",
		"RAY_API_SERVER_ADDRESS=http://" + rayhead.Dashboard + "\n", "RAY_USE_TLS=1\n", "RAY_AUTH_MODE=token\n",
		"RAY_AUTH_TOKEN_PATH=" + filepath.Join(dir, "ray-head", "cluster_token") + "\n", "PATH=" + venv + ":/usr/bin:/bin\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("head run's env lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "RAY_AUTH_TOKEN=") || strings.Contains(text, token) {
		t.Errorf("head run's env holds a token value:\n%s", text)
	}
	if code := exitCode(exec.Command(bin, "run", "--state", dir, "--", "sh", "-c", "exit 7").Run()); code != 7 {
		t.Errorf("head run of a command exiting 7: exit %d", code)
	}

	envOut, err := exec.Command(bin, "env", "--state", dir).Output()
	if err != nil || !bytes.Contains(envOut, []byte("export RAY_ADDRESS=127.0.0.1:6390\n")) || bytes.Contains(envOut, []byte(token)) {
		t.Errorf("head env (%v):\n%s", err, envOut)
	}
}
