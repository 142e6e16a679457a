package guestapi

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/internal/wire"
)

var blockScopes = map[string]guestauth.Scope{
	"identity":  guestauth.ScopeInfo,
	"processes": guestauth.ScopeContainers,
	"logs":      guestauth.ScopeLogs,
	"sysinfo":   guestauth.ScopeMetrics,
}

// TestDashboardBlocks: each block is on the page exactly when its scope is
// held (and, for logs and sysinfo, its switch is on); data behind a hidden
// block — Info, the process list — is never computed.
func TestDashboardBlocks(t *testing.T) {
	for _, on := range []bool{false, true} {
		tcbCalls, procCalls := 0, 0
		r := start(t, func(c *Config) {
			withLog(c)
			c.PublicLogs, c.PublicSysinfo, c.PublicTCBInfo = on, on, true
			c.TCB = func() wire.GuestTCB { tcbCalls++; return wire.GuestTCB{AgentSHA256: "feed"} }
			c.Processes = func() []Process {
				procCalls++
				return []Process{{Name: "ray<script>", PID: 42, State: "running"}}
			}
		})
		for block, scope := range blockScopes {
			tcbCalls, procCalls = 0, 0
			code, h, body := r.raw(t, "GET", "/", token(t, "guest:dashboard", string(scope)))
			if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
				t.Fatalf("dashboard: %d %v", code, h)
			}
			for other := range blockScopes {
				want := other == block && (on || (other != "logs" && other != "sysinfo"))
				if got := strings.Contains(body, `id="`+other+`"`); got != want {
					t.Errorf("switches=%v scope %s: block %s present=%v, want %v", on, scope, other, got, want)
				}
			}
			if wantInfo := block == "identity"; (tcbCalls > 0) != wantInfo {
				t.Errorf("scope %s: Info computed %d times", scope, tcbCalls)
			}
			if block == "sysinfo" && on {
				if procCalls == 0 {
					t.Error("sysinfo without process count")
				}
			} else if wantProcs := block == "processes"; (procCalls > 0) != wantProcs {
				t.Errorf("scope %s: processes computed %d times", scope, procCalls)
			}
			if strings.Contains(body, "<script>") {
				t.Error("process name not escaped")
			}
			if block == "logs" && on && !strings.Contains(body, `href="/logs/agent"`) {
				t.Error("logs block without the agent log link")
			}
		}
		tcbCalls, procCalls = 0, 0
		_, _, body := r.raw(t, "GET", "/", token(t, "guest:dashboard"))
		if strings.Contains(body, "<section") || tcbCalls+procCalls != 0 {
			t.Errorf("guest:dashboard alone: sections shown or data computed (%d, %d)", tcbCalls, procCalls)
		}
	}
}

// TestDashboardInChromium loads the page in headless Chromium (a real
// browser's DOM, no screenshot): a block whose scope the anonymous visitor
// lacks is absent from the DOM, a granted one is there.
func TestDashboardInChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium not installed (CI=true): apt-get install -y chromium")
		}
		t.Skip("SKIPPING: chromium not installed; apt-get update && apt-get install -y chromium")
	}
	srv, err := New(Config{AppID: testApp, AppRootKey: secret.NewBytes(testRoot),
		Policy:    wire.GuestAPIPolicy{AnonymousScopes: []string{"guest:dashboard", "guest:containers"}},
		Processes: func() []Process { return []Process{{Name: "ray", PID: 42, State: "running"}} },
		TCB:       func() wire.GuestTCB { t.Error("Info computed for a hidden block"); return wire.GuestTCB{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(l)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "http://"+l.Addr().String()+"/")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	dom := string(out)
	if !strings.Contains(dom, `<section id="processes">`) || !strings.Contains(dom, "<td>ray</td>") {
		t.Errorf("granted processes block missing from the DOM:\n%s", dom)
	}
	for _, hidden := range []string{"identity", "logs", "sysinfo"} {
		if strings.Contains(dom, `id="`+hidden+`"`) {
			t.Errorf("block %s present in the DOM without its scope", hidden)
		}
	}
}
