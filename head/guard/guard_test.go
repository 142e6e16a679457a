package guard

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// recorder is an nft that records its scripts.
type recorder struct {
	mu      sync.Mutex
	scripts []string
}

func (r *recorder) nft(_ context.Context, s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scripts = append(r.scripts, s)
	return nil
}

// has reports (for rvtest.Until) whether a script holding want ran.
func (r *recorder) has(want string) func() bool {
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, s := range r.scripts {
			if strings.Contains(s, want) {
				return true
			}
		}
		return false
	}
}

// TestWarnLeftover: with the firewall off, a table left by an earlier run
// with it on (a crashed head) still drops ports A and B for everyone but
// its stale IPs: the operator is told at start. The table is not removed:
// it may be another head's.
func TestWarnLeftover(t *testing.T) {
	for _, present := range []bool{true, false} {
		var logs bytes.Buffer
		var scripts []string
		nft := func(_ context.Context, s string) error {
			scripts = append(scripts, s)
			if !present {
				return errors.New("no such table")
			}
			return nil
		}
		WarnLeftover(context.Background(), "rvtest", nft, slog.New(slog.NewTextHandler(&logs, nil)))
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

// TestOpenUsesItsTable: the guard's scripts make and, at Close, delete
// the table it was given (each head's own: firewall.TableFor its app id),
// so a second head on the machine, or `head down` of another cluster,
// never replaces or removes this head's table.
func TestOpenUsesItsTable(t *testing.T) {
	var r recorder
	g, err := Open(context.Background(), Config{Table: "rayvast_0123456789ab", Ports: []int{8443, 8444}, Nft: r.nft})
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if len(r.scripts) == 0 || !strings.Contains(r.scripts[0], "table inet rayvast_0123456789ab {") || !strings.Contains(r.scripts[len(r.scripts)-1], "delete table inet rayvast_0123456789ab") {
		t.Errorf("the guard's nft scripts do not use its table: %q", r.scripts)
	}
}

// TestGuardsRayPorts: the Ray head's ports as RayPorts finds them are put
// in the table's rayports set and follow it when they change (a restarted
// Ray head's new random ports).
func TestGuardsRayPorts(t *testing.T) {
	var r recorder
	var ports atomic.Value
	ports.Store([]int{44217, 6379})
	rayPorts := func() ([]int, error) { return ports.Load().([]int), nil }
	g, err := Open(context.Background(), Config{Table: "rvtest", Ports: []int{8443}, Nft: r.nft, RayPorts: rayPorts, Every: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !rvtest.Until(5*time.Second, r.has("add element inet rvtest rayports { 6379, 44217 }")) {
		t.Errorf("Ray ports never guarded: %q", r.scripts)
	}
	ports.Store([]int{6379, 40001})
	if !rvtest.Until(5*time.Second, r.has("add element inet rvtest rayports { 6379, 40001 }")) {
		t.Errorf("new Ray ports never guarded: %q", r.scripts)
	}
}

// TestFollowOpensToLiveCandidates: following an external provider's
// candidates, the table lets in the running and enrolled ones' IPs and
// keeps up as they change.
func TestFollowOpensToLiveCandidates(t *testing.T) {
	var r recorder
	var cands atomic.Value
	cands.Store([]wire.Candidate{{PublicIP: "198.51.100.7", State: wire.StateRunning}, {PublicIP: "198.51.100.8", State: wire.StateEnded}})
	g, err := Open(context.Background(), Config{Table: "rvtest", Ports: []int{8443}, Nft: r.nft, Every: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.Follow(func() []wire.Candidate { return cands.Load().([]wire.Candidate) })
	if !rvtest.Until(5*time.Second, r.has("198.51.100.7")) || r.has("198.51.100.8")() {
		t.Errorf("want 198.51.100.7 allowed and not the ended 198.51.100.8: %q", r.scripts)
	}
	cands.Store([]wire.Candidate{{PublicIP: "198.51.100.9", State: wire.StateEnrolled}})
	if !rvtest.Until(5*time.Second, r.has("198.51.100.9")) {
		t.Errorf("a new enrolled candidate never allowed: %q", r.scripts)
	}
}
