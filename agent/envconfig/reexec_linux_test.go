package envconfig

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// asReexecChild makes the test binary play the agent's first steps:
// take the secrets, hide them (re-exec), then report what it holds.
const asReexecChild = "ENVCONFIG_TEST_REEXEC_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(asReexecChild) == "1" {
		reexecChild()
	}
	os.Exit(m.Run())
}

// reexecChild is main()'s opening in miniature. After the re-exec it prints
// whether both secrets arrived, then waits for stdin to close so the parent
// can read its /proc/PID/environ while it lives.
func reexecChild() {
	s, inEnviron, err := TakeSecrets()
	if err != nil {
		fmt.Println("take error:", err)
		os.Exit(3)
	}
	if inEnviron {
		if err := Reexec(s, os.Args); err != nil {
			fmt.Println("reexec error:", err)
			os.Exit(4)
		}
	}
	_, stillSet := os.LookupEnv(wire.EnvJoinToken)
	fmt.Printf("pid=%d token=%v key=%v env_has_token=%v\n", os.Getpid(),
		s[wire.EnvJoinToken].Reveal() == token, s[wire.EnvVastAPIKey].Reveal() == apiKey, stillSet)
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
