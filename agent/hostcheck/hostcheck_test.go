package hostcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// goodContainer is a fake root of a well-behaved vast container on an
// older kernel: agent is PID 1, own netns with lo and eth0, network
// capabilities dropped, empty /dev/shm, two GPUs.
func goodContainer(t testing.TB) string {
	return tree(t, map[string]string{
		"proc/self -> 1":                    "",
		"proc/1/ns/net -> net:[4026532611]": "",
		"proc/1/status":                     statusNoNet,
		"proc/sys/kernel/osrelease":         "6.8.0-49-generic\n",
		"proc/net/dev":                      netDevContainer,
		"proc/driver/nvidia/gpus/0000:01:00.0/information": "",
		"proc/driver/nvidia/gpus/0000:41:00.0/information": "",
		"dev/shm/": "",
	})
}

// TestRunFakeRoot proves Run fills every field of the report from the root
// and the resolvers, and that it passes (each check failing alone:
// wire's TestChecksRules).
func TestRunFakeRoot(t *testing.T) {
	var logs bytes.Buffer
	cfg := Config{
		Root:      goodContainer(t),
		PublicIP:  "127.0.0.1",
		Resolvers: []Resolver{whoamiAt(t, OpenDNS, "127.0.0.1", nil), whoamiAt(t, Cloudflare, "127.0.0.2", nil)},
		Timeout:   2 * time.Second,
		Log:       slog.New(slog.NewTextHandler(&logs, nil)),
	}
	r := Run(context.Background(), cfg)
	b, _ := json.Marshal(r)
	if !r.Checks.OK() || r.GPUs != 2 || r.Checks.Egress.IP != "127.0.0.1" {
		t.Fatalf("got %s, want all ok, 2 GPUs, egress IP 127.0.0.1", b)
	}
	for _, k := range []string{`"capabilities":{"ok":true`, `"netns":{"ok":true`, `"shm":{"ok":true`, `"egress":{"ok":true`} {
		if !bytes.Contains(b, []byte(k)) {
			t.Errorf("report %s lacks %s", b, k)
		}
	}
	if !strings.Contains(logs.String(), "host checks") || strings.Contains(logs.String(), "host check failed") {
		t.Errorf("logs got %q, want one summary and no failures", logs.String())
	}
}

// TestRunFailuresLogged proves failed checks are logged by name and that a
// Config without resolvers never falls back to the public defaults.
func TestRunFailuresLogged(t *testing.T) {
	var logs bytes.Buffer
	r := Run(context.Background(), Config{Root: t.TempDir(), Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if r.Checks.OK() {
		t.Fatalf("empty root passed: %+v", r)
	}
	if r.Checks.Egress.Detail != "no resolvers configured" {
		t.Errorf("egress detail got %q, want no resolvers configured", r.Checks.Egress.Detail)
	}
	for _, name := range []string{"check=capabilities", "check=netns", "check=shm", "check=egress"} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("logs lack %s: %s", name, logs.String())
		}
	}
}
