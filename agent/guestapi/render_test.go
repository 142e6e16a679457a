package guestapi

import (
	"strings"
	"testing"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestRenderEscapes proves every text the page shows from outside (process
// names and states, log names, identity fields) is HTML-escaped.
func TestRenderEscapes(t *testing.T) {
	evil := `<script>alert(1)</script>"'&`
	procs := []Process{{Name: evil, State: evil}}
	logs := []string{evil}
	page := string(renderDashboard(dashboardPage{AppID: evil,
		Identity:  &wire.GuestInfo{AppID: evil, InstanceID: evil, TCB: &wire.GuestTCB{AgentSHA256: evil}},
		Processes: &procs, Logs: &logs}))
	if strings.Contains(page, "<script>") || strings.Contains(page, `"'&<`) {
		t.Errorf("unescaped text in page:\n%s", page)
	}
	for _, id := range []string{`id="identity"`, `id="processes"`, `id="logs"`} {
		if !strings.Contains(page, id) {
			t.Errorf("block %s missing", id)
		}
	}
	if strings.Contains(page, `id="sysinfo"`) {
		t.Error("sysinfo block rendered without data")
	}
}
