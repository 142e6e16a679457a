package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/agent/envconfig"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestHelp proves every subcommand answers --help on stdout with exit 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"run", "--help"}, {"check", "--help"}, {"guest-api", "--help"}, {"version", "--help"}} {
		var out, errb bytes.Buffer
		code := dispatch(args, envconfig.Secrets{}, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "usage: agent") {
			t.Errorf("agent %v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"frobnicate"}, envconfig.Secrets{}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "frobnicate") {
		t.Errorf("exit %d, stderr %q; want 2 naming the command", code, errb.String())
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"version"}, envconfig.Secrets{}, &out, &errb); code != 0 || !strings.Contains(out.String(), "agent "+version) || !strings.Contains(out.String(), "sha256 ") {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
}

// TestRunBadEnvNamesVariablesNotSecrets proves `agent run` with a bad
// environment exits 2 naming the variables, without printing the token.
func TestRunBadEnvNamesVariablesNotSecrets(t *testing.T) {
	const bad = "this-is-not-a-valid-join-token-SECRET"
	t.Setenv(wire.EnvHead, "not-an-ip")
	var out, errb bytes.Buffer
	code := dispatch([]string{"run"}, envconfig.Secrets{wire.EnvJoinToken: secret.New(bad)}, &out, &errb)
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, name := range []string{wire.EnvHead, wire.EnvJoinToken, wire.EnvPortA} {
		if !strings.Contains(errb.String(), name) {
			t.Errorf("stderr does not name %s: %q", name, errb.String())
		}
	}
	if strings.Contains(errb.String()+out.String(), bad) {
		t.Errorf("the join token was printed")
	}
}
