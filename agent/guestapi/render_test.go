package guestapi

import (
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestRenderEscapes proves every text the page shows from outside (process
// names and states, log names, identity fields) is HTML-escaped.
func TestRenderEscapes(t *testing.T) {
	evil := `<script>alert(1)</script>"'&`
	procs := []Process{{Name: evil, State: evil}}
	logs := []string{evil}
	gpus := []gpu{{Model: evil, Bus: evil, MemTotalMiB: -1, MemUsedMiB: -1, UtilPct: -1, TempC: -1}}
	page := string(renderDashboard(dashboardPage{
		Identity:  &wire.GuestInfo{AppID: evil, InstanceID: evil, TCB: &wire.GuestTCB{AgentSHA256: evil}},
		Processes: &procs, Logs: &logs, GPUs: &gpus}))
	if strings.Contains(page, "<script>") || strings.Contains(page, `"'&<`) {
		t.Errorf("unescaped text in page:\n%s", page)
	}
	for _, id := range []string{`id="identity"`, `id="processes"`, `id="logs"`, `id="gpus"`} {
		if !strings.Contains(page, id) {
			t.Errorf("block %s missing", id)
		}
	}
	if strings.Contains(page, `id="sysinfo"`) {
		t.Error("sysinfo block rendered without data")
	}
}

// TestHumanUnits proves the page's sizes and durations read as a person
// writes them.
func TestHumanUnits(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {1536 << 10, "1.5 MiB"}, {80 << 30, "80.0 GiB"}, {3 << 40, "3.0 TiB"}} {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{1500 * time.Millisecond, "2s"}, {75 * time.Second, "1m 15s"}, {2*time.Hour + 5*time.Minute, "2h 5m"}, {50 * time.Hour, "2d 2h"}} {
		if got := humanDuration(tc.d); got != tc.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
