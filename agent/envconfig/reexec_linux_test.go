package envconfig

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// asReexecChild makes the test binary play the agent's first steps:
// take the secrets, hide them (re-exec), then report what it holds.
const asReexecChild = "ENVCONFIG_TEST_REEXEC_CHILD"

// asReader makes the test binary try to read one file and say how it went.
const asReader = "ENVCONFIG_TEST_READ"

func TestMain(m *testing.M) {
	if mode := os.Getenv(asReexecChild); mode != "" {
		reexecChild(mode)
	}
	if path := os.Getenv(asReader); path != "" {
		// Opening /proc/PID/mem is the access check (reading offset 0 fails
		// anyway); environ is checked again when read.
		f, err := os.Open(path)
		if err == nil && strings.HasSuffix(path, "environ") {
			_, err = io.ReadAll(f)
		}
		if err != nil {
			fmt.Println("denied")
		} else {
			fmt.Println("read")
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// reexecChild is main()'s opening in miniature. After the re-exec it prints
// whether both secrets arrived, then waits for stdin to close so the parent
// can read its /proc/PID/environ while it lives.
// Mode "closed-stdin" starts without fd 0, so the handover pipe could get
// it, and exits at once after reporting.
func reexecChild(mode string) {
	s, inEnviron, err := TakeSecrets()
	if err != nil {
		fmt.Println("take error:", err)
		os.Exit(3)
	}
	if inEnviron && mode == "closed-stdin" {
		syscall.Close(0)
	}
	if inEnviron {
		if err := Reexec(s, os.Args); err != nil {
			fmt.Println("reexec error:", err)
			os.Exit(4)
		}
	}
	if err := Undumpable(); err != nil {
		fmt.Println("undumpable error:", err)
		os.Exit(5)
	}
	_, stillSet := os.LookupEnv(wire.EnvJoinToken)
	fmt.Printf("pid=%d token=%v key=%v env_has_token=%v\n", os.Getpid(),
		s[wire.EnvJoinToken].Reveal() == token, s[wire.EnvVastAPIKey].Reveal() == apiKey, stillSet)
	if mode == "closed-stdin" {
		os.Exit(0)
	}
	bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

// TestReexecHidesSecretsFromProcEnviron proves that after TakeSecrets and
// Reexec no secret value is in the kernel's copy of the process's initial
// environment (/proc/PID/environ, readable by every process of the same
// uid: Ray's workers), that the PID is unchanged (PID 1 stays PID 1), and
// that the secrets still arrive.
func TestReexecHidesSecretsFromProcEnviron(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), asReexecChild+"=1",
		wire.EnvJoinToken+"="+token, wire.EnvVastAPIKey+"="+apiKey, "ENVCONFIG_TEST_PLAIN=kept",
		"ENVCONFIG_TEST_COPY=Bearer "+apiKey)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	want := fmt.Sprintf("pid=%d token=true key=true env_has_token=false\n", cmd.Process.Pid)
	if line != want {
		t.Errorf("child reported %q, want %q", line, want)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"join token": token, "container api key": apiKey} {
		if strings.Contains(string(environ), v) {
			t.Errorf("/proc/PID/environ of the running process holds the %s", name)
		}
	}
	if strings.Contains(string(environ), wire.EnvJoinToken+"=") {
		t.Errorf("/proc/PID/environ still names %s", wire.EnvJoinToken)
	}
	if !strings.Contains(string(environ), "ENVCONFIG_TEST_PLAIN=kept") {
		t.Errorf("/proc/PID/environ lost an ordinary variable")
	}
}

// TestReexecWithoutStdin proves the secrets cross the re-exec even when the
// process started with fd 0 closed and the pipe's read end took it.
func TestReexecWithoutStdin(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), asReexecChild+"=closed-stdin",
		wire.EnvJoinToken+"="+token, wire.EnvVastAPIKey+"="+apiKey)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "token=true key=true env_has_token=false") {
		t.Errorf("child reported %q, want both secrets", out)
	}
}

// TestHandoverFormat proves the pipe's content round-trips and that only
// secret names, a JSON object and a bounded size are accepted.
func TestHandoverFormat(t *testing.T) {
	in := Secrets{wire.EnvJoinToken: secretOf(token), wire.EnvVastAPIKey: secretOf(apiKey)}
	b, err := encodeHandover(in)
	if err != nil {
		t.Fatal(err)
	}
	out := Secrets{}
	if err := decodeHandover(b, out); err != nil || out[wire.EnvJoinToken].Reveal() != token || out[wire.EnvVastAPIKey].Reveal() != apiKey {
		t.Errorf("round trip: %v, err %v", out, err)
	}
	for _, bad := range []string{`{"PATH":"/evil"}`, `["x"]`, `{"` + wire.EnvJoinToken + `":1}`} {
		if err := decodeHandover([]byte(bad), Secrets{}); err == nil {
			t.Errorf("decodeHandover(%s) accepted", bad)
		}
	}
	if _, err := encodeHandover(Secrets{wire.EnvVastAPIKey: secretOf(strings.Repeat("k", maxHandover))}); err == nil {
		t.Error("an oversized handover was accepted (its pipe write could block forever)")
	}
	if err := readHandover("0", Secrets{}); err == nil {
		t.Error("readHandover accepted stdin")
	}
}

func secretOf(v string) secret.String { return secret.New(v) }

// TestUndumpableKeepsSameUIDOut proves that a process of the agent's own uid
// (a Ray worker) cannot read the agent's /proc/PID/environ or memory once
// the agent made itself undumpable. Root-only: both run as uid 65534.
func TestUndumpableKeepsSameUIDOut(t *testing.T) {
	rvtest.NeedRoot(t) // to run processes as uid 65534
	// A copy of the test binary that uid 65534 may execute.
	dir, err := os.MkdirTemp("", "envconfig-undumpable")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "envconfig.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil || os.Chmod(dir, 0o755) != nil {
		t.Fatal(err)
	}
	nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}

	agent := exec.Command(bin, "-test.run=^$")
	agent.Env = []string{asReexecChild + "=1", wire.EnvJoinToken + "=" + token, wire.EnvVastAPIKey + "=" + apiKey}
	agent.SysProcAttr = nobody
	stdin, _ := agent.StdinPipe()
	stdout, _ := agent.StdoutPipe()
	agent.Stderr = os.Stderr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); agent.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, "token=true") {
		t.Fatalf("agent stand-in said %q: %v", line, err)
	}
	for _, f := range []string{"environ", "mem"} {
		reader := exec.Command(bin, "-test.run=^$")
		reader.Env = []string{fmt.Sprintf("%s=/proc/%d/%s", asReader, agent.Process.Pid, f)}
		reader.SysProcAttr = nobody
		out, err := reader.Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != "denied" {
			t.Errorf("a same-uid process reading the agent's /proc/PID/%s: %s, want denied", f, got)
		}
	}
}
