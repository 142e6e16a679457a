package guestapi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
	"github.com/rayvast/rayvast/internal/rvtest"
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

// gpuHost is a fixture GPU host: ROOT/proc/driver/nvidia/gpus/<bus>/information
// in the driver's "Key:\t value" shape (NVIDIA's procfs file as the open
// kernel modules write it: Model, IRQ, GPU UUID, Video BIOS, Bus Type, DMA
// Size, DMA Mask, Bus Location, Device Minor, GPU Excluded), and a stand-in
// nvidia-smi answering the CSV query of gpus.go (`--format=csv,noheader,
// nounits` prints one line per GPU, comma-space separated, in query order;
// nvidia-smi --help-query-gpu). smi "" leaves nvidia-smi out.
func gpuHost(t *testing.T, smi string) (root, smiPath string) {
	t.Helper()
	root = t.TempDir()
	for i, model := range []string{"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"} {
		bus := fmt.Sprintf("0000:%02x:00.0", i+1)
		dir := filepath.Join(root, "proc/driver/nvidia/gpus", bus)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		info := fmt.Sprintf("Model: \t\t %s\nIRQ:   \t\t 186\nGPU UUID: \t GPU-5a1e0000-0000-0000-0000-00000000000%d\n"+
			"Video BIOS: \t 92.00.45.00.06\nBus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"+
			"Bus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n", model, i, bus, i)
		if err := os.WriteFile(filepath.Join(dir, "information"), []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// /proc/meminfo and /proc/loadavg in the kernel's shapes (proc(5)).
	must(t, os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte("MemTotal:       263855636 kB\nMemFree:        1000 kB\nMemAvailable:   201326592 kB\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "proc/loadavg"), []byte("3.52 2.10 1.07 2/1234 5678\n"), 0o644))
	if smi == "" {
		return root, "-"
	}
	smiPath = filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(smiPath, []byte("#!/bin/sh\ncat <<'EOF'\n"+smi+"EOF\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, smiPath
}

const smiA100s = "00000000:01:00.0, NVIDIA A100-SXM4-80GB, 81920, 1024, 37, 41\n" +
	"00000000:02:00.0, NVIDIA A100-SXM4-80GB, 81920, [N/A], [N/A], 39\n"

// TestGPUSource reads the fixture host: models from the driver's files,
// numbers from nvidia-smi when present, placeholders when not.
func TestGPUSource(t *testing.T) {
	root, smi := gpuHost(t, smiA100s)
	got := (&gpuSource{root: root, smi: smi, now: time.Now}).read()
	want := []gpu{
		{Model: "NVIDIA A100-SXM4-80GB", Bus: "0000:01:00.0", MemTotalMiB: 81920, MemUsedMiB: 1024, UtilPct: 37, TempC: 41},
		{Model: "NVIDIA A100-SXM4-80GB", Bus: "0000:02:00.0", MemTotalMiB: 81920, MemUsedMiB: -1, UtilPct: -1, TempC: 39},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with nvidia-smi:\ngot  %+v\nwant %+v", got, want)
	}
	root, smi = gpuHost(t, "")
	got = (&gpuSource{root: root, smi: smi, now: time.Now}).read()
	if len(got) != 2 || got[0].Model != "NVIDIA A100-SXM4-80GB" || got[0].MemTotalMiB != -1 || got[1].TempC != -1 {
		t.Errorf("without nvidia-smi: %+v, want 2 models and unknown numbers", got)
	}
	if got := (&gpuSource{root: t.TempDir(), smi: "-", now: time.Now}).read(); len(got) != 0 {
		t.Errorf("no GPU host: %+v", got)
	}
}

// TestDashboardInChromium loads the page in headless Chromium (a real
// browser's DOM, and a screenshot of each case in RAYVAST_SCREENSHOTS or
// the test's temp dir): a block whose scope the anonymous visitor lacks is
// absent, a granted one is there, and nothing outside the blocks (the
// title included) names the app.
func TestDashboardInChromium(t *testing.T) {
	rvtest.NeedTools(t, "chromium") // apt-get install -y chromium
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal(err)
	}
	shots := os.Getenv("RAYVAST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	root, smi := gpuHost(t, smiA100s)
	ray := []Process{{Name: "ray", PID: 42, State: "running", Restarts: 2}}
	for _, tc := range []struct {
		name       string
		scopes     []string
		sysinfo    bool
		procs      []Process
		want, not  []string // in the DOM, not in it
		wantBlocks []string
	}{
		{name: "dashboard-only", scopes: []string{"guest:dashboard"}, sysinfo: true, procs: ray,
			want: []string{"<title>rayvast node</title>", "granted no block"}, not: []string{testApp, "<section"}},
		{name: "processes", scopes: []string{"guest:dashboard", "guest:containers"}, procs: ray,
			want: []string{"<td>ray</td>", "<td>running</td>", "<td>2</td>"}, not: []string{testApp}, wantBlocks: []string{"processes"}},
		{name: "gpu-host", scopes: []string{"guest:dashboard", "guest:metrics"}, sysinfo: true, procs: ray,
			want: []string{"NVIDIA A100-SXM4-80GB", "1.0 GiB used of 80.0 GiB", "37 %", "41 °C", "0000:02:00.0", "192.0 GiB available of 251.6 GiB", "3.52 · 2.10 · 1.07"},
			not:  []string{testApp, "GPU-5a1e"}, wantBlocks: []string{"sysinfo", "gpus"}},
		{name: "metrics-switch-off", scopes: []string{"guest:dashboard", "guest:metrics"}, procs: ray,
			not: []string{testApp, "A100"}},
		{name: "standalone-everything", scopes: []string{"guest:dashboard", "guest:info", "guest:containers", "guest:logs", "guest:metrics"}, sysinfo: true,
			want:       []string{testApp, "standalone: no node identity", "not run: standalone", "No supervised process"},
			wantBlocks: []string{"identity", "processes", "sysinfo", "gpus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			procs := tc.procs
			srv, err := New(Config{AppID: testApp, AppRootKey: secret.NewBytes(testRoot), PublicSysinfo: tc.sysinfo, PublicTCBInfo: true,
				Policy:    wire.GuestAPIPolicy{AnonymousScopes: tc.scopes},
				Processes: func() []Process { return procs },
				TCB:       func() wire.GuestTCB { return wire.GuestTCB{AgentSHA256: "feed"} },
				Root:      root, NvidiaSMI: smi,
			})
			if err != nil {
				t.Fatal(err)
			}
			url := "http://" + rvtest.ServeLoopback(t, srv).String() + "/"
			shot := filepath.Join(shots, "dashboard-"+tc.name+".png")
			dom := chromium(t, bin, "--dump-dom", "--screenshot="+shot, "--window-size=1000,800", url)
			if fi, err := os.Stat(shot); err != nil || fi.Size() == 0 {
				t.Errorf("no screenshot at %s: %v", shot, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(dom, w) {
					t.Errorf("DOM lacks %q:\n%s", w, dom)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(dom, n) {
					t.Errorf("DOM holds %q:\n%s", n, dom)
				}
			}
			for _, b := range []string{"identity", "processes", "logs", "sysinfo", "gpus"} {
				if got, want := strings.Contains(dom, `id="`+b+`"`), slices.Contains(tc.wantBlocks, b); got != want {
					t.Errorf("block %s in the DOM: %v, want %v", b, got, want)
				}
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// chromium runs headless Chromium once with args (the URL last).
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}, args...)
	out, err := exec.CommandContext(ctx, bin, all...).Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return string(out)
}
