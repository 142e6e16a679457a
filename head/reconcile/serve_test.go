package reconcile

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestStartServe: the loop starts at once (min_workers rented through the
// admin API, reasons kept through End) and stop returns; with the
// firewall off nothing touches nftables.
func TestStartServe(t *testing.T) {
	reg, rr, adm := newAdmin(t)
	stop, err := StartServe(context.Background(), ServeConfig{Admin: adm,
		NodeTypes: map[string]wire.NodeType{"gpu": {GPUs: 1, MinWorkers: 2, MaxWorkers: 2}}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rvtest.Until(10*time.Second, func() bool { return len(reg.Candidates()) >= 2 })
	stop()
	if n := len(reg.Candidates()); n != 2 || len(rr.rented) != 2 {
		t.Errorf("candidates %d, rented %d; want 2 and 2", n, len(rr.rented))
	}
}

// TestStartServeWarnsOfLeftoverTable: with the firewall off, a table left
// by an earlier run with it on (a crashed head) still drops ports A and B
// for everyone but its stale IPs: the operator is told at start. The table
// is not removed: it may be another head's.
func TestStartServeWarnsOfLeftoverTable(t *testing.T) {
	for _, present := range []bool{true, false} {
		_, _, adm := newAdmin(t)
		var logs bytes.Buffer
		var scripts []string
		nft := func(_ context.Context, s string) error {
			scripts = append(scripts, s)
			if !present {
				return errors.New("no such table")
			}
			return nil
		}
		stop, err := StartServe(context.Background(), ServeConfig{Admin: adm, StateDir: t.TempDir(), Nft: nft,
			Log: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		stop()
		if got := strings.Contains(logs.String(), "still guards"); got != present {
			t.Errorf("table present %v: warned %v:\n%s", present, got, logs.String())
		}
		for _, s := range scripts {
			if strings.Contains(s, "delete") || strings.Contains(s, "add") || strings.Contains(s, "flush") {
				t.Errorf("firewall off changed nftables: %q", s)
			}
		}
	}
}

// TestFirewallTablePerCluster: each head's table is named after its state
// (app id), so a second head on the machine, or `head down` of another
// cluster, never replaces or removes this head's table.
func TestFirewallTablePerCluster(t *testing.T) {
	var dirs []string
	for i := 0; i < 2; i++ {
		dir := filepath.Join(t.TempDir(), "state")
		if err := statedir.Init(statedir.Options{Dir: dir, IP: "127.0.0.1", Cluster: "c"}); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	a := firewall.TableForStateDir(dirs[0]) // its naming: head/firewall's TestTableForStateDir
	_, _, adm := newAdmin(t)
	var scripts []string
	nft := func(_ context.Context, s string) error { scripts = append(scripts, s); return nil }
	stop, err := StartServe(context.Background(), ServeConfig{Admin: adm, StateDir: dirs[0], Firewall: true, Ports: []int{8443, 8444}, Nft: nft})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if len(scripts) == 0 || !strings.Contains(scripts[0], "table inet "+a+" {") || !strings.Contains(scripts[len(scripts)-1], "delete table inet "+a) {
		t.Errorf("serve's nft scripts do not use table %s: %q", a, scripts)
	}
}

// TestStartServeGuardsRayPorts: with the firewall on, the Ray head's ports
// as RayPorts finds them are put in the table's rayports set and follow
// it when they change (a restarted Ray head's new random ports); with the
// firewall off RayPorts is never asked.
func TestStartServeGuardsRayPorts(t *testing.T) {
	var mu sync.Mutex
	var scripts []string
	nft := func(_ context.Context, s string) error {
		mu.Lock()
		defer mu.Unlock()
		scripts = append(scripts, s)
		return nil
	}
	has := func(want string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range scripts {
				if strings.Contains(s, want) {
					return true
				}
			}
			return false
		}
	}
	var ports atomic.Value
	ports.Store([]int{44217, 6379})
	var asked atomic.Int64
	rayPorts := func() ([]int, error) { asked.Add(1); return ports.Load().([]int), nil }
	_, _, adm := newAdmin(t)
	stop, err := StartServe(context.Background(), ServeConfig{Admin: adm, StateDir: t.TempDir(), Firewall: true,
		FirewallTable: "rvtest", Ports: []int{8443}, Nft: nft, RayPorts: rayPorts, RayPortsEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !rvtest.Until(5*time.Second, has("add element inet rvtest rayports { 6379, 44217 }")) {
		t.Errorf("Ray ports never guarded: %q", scripts)
	}
	ports.Store([]int{6379, 40001})
	if !rvtest.Until(5*time.Second, has("add element inet rvtest rayports { 6379, 40001 }")) {
		t.Errorf("new Ray ports never guarded: %q", scripts)
	}
	stop()

	asked.Store(0)
	stop, err = StartServe(context.Background(), ServeConfig{Admin: adm, StateDir: t.TempDir(),
		FirewallTable: "rvtest2", Nft: func(context.Context, string) error { return errors.New("no table") },
		RayPorts: rayPorts, RayPortsEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	stop()
	if n := asked.Load(); n != 0 {
		t.Errorf("firewall off: RayPorts asked %d times", n)
	}
}
