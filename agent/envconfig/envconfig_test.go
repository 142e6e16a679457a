package envconfig

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

const (
	token  = "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80" // 43 chars, base64url of 32 bytes
	hexSum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	apiKey = "vast-container-api-key-9f8e7d"
)

func portList(base int) string {
	s := make([]string, wire.PortCount)
	for i := range s {
		s[i] = fmt.Sprint(base + i)
	}
	return strings.Join(s, ",")
}

func goodEnv() map[string]string {
	return map[string]string{
		wire.EnvHead:            "198.51.100.1",
		wire.EnvPortA:           "8443",
		wire.EnvPortB:           "8444",
		wire.EnvBootstrapSHA256: hexSum,
		wire.EnvCASHA256:        hexSum,
		wire.EnvJoinToken:       token,
		wire.EnvInstanceID:      "12345",
		wire.EnvPublicIP:        "203.0.113.7",
		wire.EnvPorts:           portList(40000),
		wire.EnvVastAPIKey:      apiKey,
	}
}

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseGood(t *testing.T) {
	c, err := Parse(lookup(goodEnv()))
	if err != nil {
		t.Fatalf("good env refused: %v", err)
	}
	if got, want := c.Head.String(), "198.51.100.1"; got != want {
		t.Errorf("Head = %s, want %s", got, want)
	}
	if c.PortA != 8443 || c.PortB != 8444 {
		t.Errorf("ports A/B = %d/%d, want 8443/8444", c.PortA, c.PortB)
	}
	if c.JoinToken.Reveal() != token || c.ContainerAPIKey.Reveal() != apiKey {
		t.Errorf("secrets not carried")
	}
	if len(c.Ports) != 64 || c.Ports[0] != 40000 || c.Ports[63] != 40063 {
		t.Errorf("Ports = %v", c.Ports)
	}
	if c.State != DefaultState || c.Python != DefaultPython {
		t.Errorf("defaults: state %q python %q", c.State, c.Python)
	}
	if c.Restart != (Restart{MaxRestarts: -1}) {
		t.Errorf("restart knobs unset: got %+v, want MaxRestarts -1 and zero durations", c.Restart)
	}
	env := goodEnv()
	env[wire.EnvRayMaxRestarts], env[wire.EnvRayRestartWindow], env[wire.EnvRayRestartDelay] = "0", "90s", "250ms"
	if c, err := Parse(lookup(env)); err != nil || c.Restart != (Restart{0, 90 * time.Second, 250 * time.Millisecond}) {
		t.Errorf("restart knobs: got %+v, %v", c.Restart, err)
	}
	if c.PublicLogs || c.PublicSysinfo || !c.PublicTCBInfo {
		t.Errorf("switch defaults: logs %v sysinfo %v tcbinfo %v, want false false true", c.PublicLogs, c.PublicSysinfo, c.PublicTCBInfo)
	}
}

// TestParseVastNames proves vast's own names are used when the RAYVAST_
// ones are absent, and that the RAYVAST_ ones win when both are set.
func TestParseVastNames(t *testing.T) {
	env := goodEnv()
	delete(env, wire.EnvInstanceID)
	delete(env, wire.EnvPublicIP)
	delete(env, wire.EnvPorts)
	env[wire.EnvVastContainerID] = "777"
	env[wire.EnvVastPublicIP] = "2001:db8::7"
	for i := 0; i < 64; i++ {
		env[fmt.Sprintf("VAST_TCP_PORT_%d", 70000+i)] = fmt.Sprint(30000 + i)
	}
	env[wire.EnvVastGPUCount] = "8" // never trusted: no field carries it
	c, err := Parse(lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if c.InstanceID != "777" || c.PublicIP.String() != "2001:db8::7" || c.Ports[5] != 30005 {
		t.Errorf("got id %q ip %s port[5] %d", c.InstanceID, c.PublicIP, c.Ports[5])
	}
	env[wire.EnvInstanceID] = "rv-1"
	env[wire.EnvPublicIP] = "203.0.113.9"
	env[wire.EnvPorts] = portList(50000)
	c, err = Parse(lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if c.InstanceID != "rv-1" || c.PublicIP.String() != "203.0.113.9" || c.Ports[5] != 50005 {
		t.Errorf("RAYVAST_ names must win: got id %q ip %s port[5] %d", c.InstanceID, c.PublicIP, c.Ports[5])
	}
}

// TestParseBad proves every bad variable is named in the error, and a bad
// secret's value never appears in it.
func TestParseBad(t *testing.T) {
	for _, c := range []struct {
		name, key, val string
	}{
		{"head missing", wire.EnvHead, ""},
		{"head hostname", wire.EnvHead, "head.example.com"},
		{"head unspecified", wire.EnvHead, "0.0.0.0"},
		{"head zone", wire.EnvHead, "fe80::1%eth0"},
		{"port A zero", wire.EnvPortA, "0"},
		{"port B big", wire.EnvPortB, "65536"},
		{"port B word", wire.EnvPortB, "https"},
		{"bootstrap upper hex", wire.EnvBootstrapSHA256, strings.ToUpper(hexSum)},
		{"ca short", wire.EnvCASHA256, hexSum[:63]},
		{"token short", wire.EnvJoinToken, token[:42]},
		{"token padded std base64", wire.EnvJoinToken, "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq8+"},
		{"token missing", wire.EnvJoinToken, ""},
		{"instance id slash", wire.EnvInstanceID, "a/b"},
		{"public ip bad", wire.EnvPublicIP, "203.0.113"},
		{"ports 63", wire.EnvPorts, portList(40000)[:strings.LastIndex(portList(40000), ",")]},
		{"ports dup", wire.EnvPorts, "40001," + portList(40001)[6:] + ",40001"},
		{"ports junk", wire.EnvPorts, "x," + portList(40001)[6:]},
		{"logs switch", wire.EnvPublicLogs, "yes"},
		{"state relative", wire.EnvState, "run/rayvast"},
		{"max restarts negative", wire.EnvRayMaxRestarts, "-1"},
		{"max restarts word", wire.EnvRayMaxRestarts, "many"},
		{"restart window bare number", wire.EnvRayRestartWindow, "600"},
		{"restart delay zero", wire.EnvRayRestartDelay, "0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := goodEnv()
			if c.val == "" {
				delete(env, c.key)
			} else {
				env[c.key] = c.val
			}
			_, err := Parse(lookup(env))
			if err == nil {
				t.Fatalf("Parse accepted %s=%q", c.key, c.val)
			}
			if !strings.Contains(err.Error(), c.key) {
				t.Errorf("error %q does not name %s", err, c.key)
			}
			if c.key == wire.EnvJoinToken && c.val != "" && strings.Contains(err.Error(), c.val) {
				t.Errorf("error quotes the join token: %q", err)
			}
		})
	}
}

func TestParseAllErrorsAtOnce(t *testing.T) {
	_, err := Parse(lookup(map[string]string{}))
	for _, name := range []string{wire.EnvHead, wire.EnvPortA, wire.EnvPortB, wire.EnvBootstrapSHA256, wire.EnvCASHA256, wire.EnvJoinToken, wire.EnvInstanceID, wire.EnvPublicIP, wire.EnvPorts} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("empty env: error %v does not name %s", err, name)
		}
	}
}

// TestTakeSecrets proves the secrets leave the process environment and are
// still answered by the returned lookup. (It sets real env vars, through
// t.Setenv, which restores them and forbids t.Parallel.)
func TestTakeSecrets(t *testing.T) {
	t.Setenv(wire.EnvJoinToken, token)
	t.Setenv(wire.EnvVastAPIKey, apiKey)
	t.Setenv(wire.EnvHead, "198.51.100.1")
	s, inEnviron, err := TakeSecrets()
	if err != nil || !inEnviron {
		t.Errorf("TakeSecrets: inEnviron %v, err %v; want true, nil", inEnviron, err)
	}
	for _, n := range SecretVars {
		if _, ok := os.LookupEnv(n); ok {
			t.Errorf("%s still in the process environment", n)
		}
		for _, kv := range os.Environ() {
			if strings.Contains(kv, token) || strings.Contains(kv, apiKey) {
				t.Errorf("a secret value is still in os.Environ: %s=…", strings.SplitN(kv, "=", 2)[0])
			}
		}
	}
	l := s.Lookup(os.LookupEnv)
	if v, _ := l(wire.EnvJoinToken); v != token {
		t.Errorf("lookup lost the join token")
	}
	if v, _ := l(wire.EnvHead); v != "198.51.100.1" {
		t.Errorf("lookup lost a plain variable: %q", v)
	}
	if got := fmt.Sprintf("%v", s); strings.Contains(got, token) {
		t.Errorf("printing Secrets reveals the token")
	}
}

// TestSecretsForms proves agent check scrubs the taken secrets by value:
// they are no longer in the environment for anyone to read by name.
func TestSecretsForms(t *testing.T) {
	s := Secrets{wire.EnvJoinToken: secret.New(token), wire.EnvVastAPIKey: secret.New(apiKey)}
	got := s.Forms()
	if !secret.Holds("Bearer "+token, got) || !secret.Holds(apiKey, got) {
		t.Errorf("Forms() = %d forms; want both secrets found by secret.Holds", len(got))
	}
	if got := (Secrets{}).Forms(); len(got) != 0 {
		t.Errorf("Forms() of no secrets = %d forms, want 0", len(got))
	}
}
