package bootloader_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestEmbeddedAgent: an image that holds the agent at /opt/rayvast/agent
// (the "agent built in" recipe) boots without fetching it when its SHA-256
// is the pinned one (the head is never asked), and one whose hash differs
// is not run: the head's agent is fetched and run instead. /opt is a tmpfs
// of the run's own mount namespace, so the machine's /opt is not touched.
func TestEmbeddedAgent(t *testing.T) {
	rvtest.NeedRoot(t, "unshare", "mount")
	py := pythons(t)[0]
	cases := []struct {
		name     string
		embedded func(s *setup) []byte
		fetches  int32
	}{
		{"the pinned agent, not fetched", func(s *setup) []byte { return s.agent }, 0},
		{"another agent, the head's fetched and run", func(s *setup) []byte {
			return []byte("#!/bin/sh\necho embedded >\"$BOOTTEST_MARK\"\n")
		}, 1},
	}
	forEachShell(t, func(t *testing.T, sh shell) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := newSetup(t, py)
				h := newHead(t, nil, serveBytes(s.agent))
				s.env["RAYVAST_PORT_A"] = h.port()
				img := filepath.Join(t.TempDir(), "agent")
				if err := os.WriteFile(img, c.embedded(s), 0o755); err != nil {
					t.Fatal(err)
				}
				prefix := append([]string{"unshare", "-m", "sh", "-c",
					`mount -t tmpfs none /opt && mkdir /opt/rayvast && cp "$0" /opt/rayvast/agent && shift && exec "$@"`, img, "--"}, sh.argv...)
				r := run(t, prefix, s.env)
				got, ok := agentRan(t, s.mark)
				if r.code != 0 || !ok || got["token"] != joinToken {
					t.Fatalf("exit %d, agent ran %v (%v); stderr:\n%s", r.code, ok, got, r.stderr)
				}
				if n := h.requests.Load(); n != c.fetches {
					t.Errorf("the head was asked %d times, want %d", n, c.fetches)
				}
			})
		}
	})
}
