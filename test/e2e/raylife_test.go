package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
)

// Issue 22: Ray's lifecycle told truly and recovered fast, with real Ray.

// recoverTarget is how soon after the Ray head's GCS dies both nodes
// should run a task again (issue 43: ≤ 20 s with the GCS's store, the
// nodes' Ray kept; it took 90–94 s before issue 22 and 11–12 s with the
// nodes' Ray restarted). It is a figure, logged on the RECOVERY line and
// written in docs/figures.md, not a pass mark: on 2 shared cores one run
// took 22 s where others took 14–17 s, and a timed test that flakes lands
// nothing. recoverLimit is the pass mark: past it recovery is broken (the
// nodes' raylets waiting out a GCS timeout, or Ray restarted on them).
const (
	recoverTarget = 20 * time.Second
	recoverLimit  = 60 * time.Second
)

// checkRecovery logs the recovery figure against its target and fails
// past the limit.
func checkRecovery(t *testing.T, line string, worst float64) {
	t.Helper()
	verdict := "within the target"
	if worst > recoverTarget.Seconds() {
		verdict = "OVER THE TARGET"
	}
	t.Logf("RECOVERY %s: %.1f s (target %s: %s; limit %s)", line, worst, recoverTarget, verdict, recoverLimit)
	if worst > recoverLimit.Seconds() {
		t.Errorf("%s: %.1f s, want ≤ %s", line, worst, recoverLimit)
	}
}

// joinSlack is how much later than the head's first "running" a node may
// first appear alive in ray.nodes(): the watcher samples every 0.1 s.
const joinSlack = 500 * time.Millisecond

func TestRayLifeNewest(t *testing.T) { rayLife(t, rvtest.RayNewest) }
func TestRayLifeOldest(t *testing.T) { rayLife(t, rvtest.RayOldest) }

// rayLife: with real Ray on the Docker provider, (1) each node is reported
// starting, then running only once ray.nodes() lists it alive (a driver on
// the head's machine watches Ray's node table while the test watches the
// head's); (2) after the Ray head's GCS is SIGKILLed, tasks run on both
// nodes again within 30 s (the head restarts the Ray head at once and tells
// the nodes in heartbeat answers; each restarts its Ray at once).
func rayLife(t *testing.T, version string) {
	// No rentals until the watcher is connected: min_workers 0, then two
	// candidates through the admin API.
	c := startRayClusterMinMax(t, version, 0, 2)
	waitFor(t, 4*time.Minute, "the Ray head running", func() (bool, string) {
		st, ok, _ := rayhead.ReadStatus(c.state)
		return ok && st.State == rayhead.Running, st.State
	})
	watch := c.probe(t, "watch", 2, 8*time.Minute)
	if _, ok := watch.next(2*time.Minute, "connected"); !ok {
		t.Fatalf("the watching driver did not connect:\n%s", watch.output())
	}
	watchFrom := time.Now()
	for range 2 {
		if _, err := c.admin.Create(context.Background(), wire.CandidateRequest{NodeType: safeType}); err != nil {
			t.Fatal(err)
		}
	}

	// The head's view, every 0.1 s: when each node was first starting and
	// first running.
	starting, running := map[string]time.Time{}, map[string]time.Time{}
	waitFor(t, 5*time.Minute, "2 nodes with Ray running", func() (bool, string) {
		now := time.Now()
		for _, n := range c.nodes() {
			m := map[string]map[string]time.Time{wire.RayStarting: starting, wire.RayRunning: running}[n.Ray.State]
			if _, seen := m[n.PublicIP]; m != nil && !seen {
				m[n.PublicIP] = now
			}
		}
		return len(running) == 2, fmt.Sprintf("starting %v, running %v", slices.Sorted(maps.Keys(starting)), slices.Sorted(maps.Keys(running)))
	})
	time.Sleep(joinSlack + 200*time.Millisecond) // the watcher's samples up to then
	alive := watch.firstAlive()
	watch.stop()
	for ip, r := range running {
		s, wasStarting := starting[ip]
		a, isAlive := alive[ip]
		t.Logf("node %s: starting seen %s, running %s, alive in ray.nodes() %s (after the watcher connected)",
			ip, since(watchFrom, s, wasStarting), since(watchFrom, r, true), since(watchFrom, a, isAlive))
		switch {
		case r.Before(watchFrom):
			t.Errorf("node %s was reported running before the watcher connected: nothing proven", ip)
		case !wasStarting || !s.Before(r):
			t.Errorf("node %s was never reported starting before running", ip)
		case !isAlive:
			t.Errorf("node %s reported running, yet ray.nodes() never listed it alive within %s", ip, joinSlack)
		case a.After(r.Add(joinSlack)):
			t.Errorf("node %s reported running %s before ray.nodes() listed it alive", ip, a.Sub(r).Round(time.Millisecond))
		}
	}
	if t.Failed() {
		return
	}

	t.Run("GCS killed", func(t *testing.T) {
		before, _, _ := rayhead.ReadStatus(c.state)
		killed := time.Now()
		killHeadGCS(t, c.state)
		up := waitHeadBack(t, c.state, before)
		t.Logf("GCS killed → the Ray head running again: %s", up.Round(100*time.Millisecond))
		tasks := c.probe(t, "tasks", 2, 3*time.Minute)
		done := map[string]float64{}
		for len(done) < 2 {
			ev, ok := tasks.next(3*time.Minute, "task")
			if !ok {
				t.Fatalf("tasks on both nodes: only %v within 3 min:\n%s", done, tasks.output())
			}
			done[ev.IP] = ev.T - float64(killed.UnixNano())/1e9
		}
		tasks.stop()
		worst := 0.0
		for ip, s := range done {
			t.Logf("GCS killed → node %s: a task ran %.1f s", ip, s)
			worst = math.Max(worst, s)
		}
		t.Logf("the driver's events, seconds after the kill:\n%s", tasks.timeline(killed))
		checkRecovery(t, fmt.Sprintf("Ray %s: GCS killed → tasks on both nodes again", version), worst)
		if st, _, _ := rayhead.ReadStatus(c.state); st.ID != before.ID {
			t.Errorf("the Ray head's ID %s → %s across a GCS restart with its store, want the same (the same cluster)", before.ID, st.ID)
		}
		for _, n := range c.nodes() {
			if n.Ray.Restarts != 0 {
				t.Errorf("node %s: Ray restarts %d, want 0 (its raylet waits for the GCS with its store; the agent leaves Ray be)", n.InstanceID, n.Ray.Restarts)
			}
		}
	})
}

func since(from, t time.Time, ok bool) string {
	if !ok {
		return "never"
	}
	return fmt.Sprintf("%+.1fs", t.Sub(from).Seconds())
}

// probeScript is a driver run on the head's machine through `head run`.
// "watch": connect, then print the alive worker IPs every 0.1 s. "tasks":
// connect (retrying while the Ray head restarts), then run one task pinned
// to each worker as soon as Ray lists it, printing when each ran.
const probeScript = `
import json, sys, time
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

def say(**kw):
    kw["t"] = time.time()
    print(json.dumps(kw), flush=True)

def workers():
    out = {}
    for n in ray.nodes():
        if n.get("Alive") and "node:__internal_head__" not in n.get("Resources", {}):
            out.setdefault(n["NodeManagerAddress"], []).append(n)
    return out

@ray.remote(num_cpus=1)
def here():
    return ray.get_runtime_context().get_node_id()

mode, want, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.time() + limit
while True:
    try:
        ray.init(logging_level="ERROR")
        break
    except Exception as e:
        if time.time() > deadline:
            raise
        say(event="connect_error", error=str(e)[:200])
        try:
            ray.shutdown()
        except Exception:
            pass
        time.sleep(0.2)
say(event="connected")
if mode == "watch":
    while time.time() < deadline:
        say(event="alive", ips=sorted(workers()))
        time.sleep(0.1)
    sys.exit(0)
done, pending = {}, {}
while len(done) < want and time.time() < deadline:
    for ip, ns in workers().items():
        if ip in done or ip in pending or len(ns) != 1:
            continue
        nid = ns[0]["NodeID"]
        pending[ip] = (here.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False)).remote(), nid)
    if not pending:
        time.sleep(0.2)
        continue
    ready, _ = ray.wait([r for r, _ in pending.values()], num_returns=1, timeout=0.2)
    for ip, (ref, nid) in list(pending.items()):
        if ref in ready:
            try:
                if ray.get(ref) == nid:
                    done[ip] = time.time()
                    say(event="task", ip=ip)
            except Exception as e:
                say(event="task_error", ip=ip, error=str(e)[:200])
            del pending[ip]
say(event="end", ok=len(done) >= want)
`

// probeEvent is one line of probeScript.
type probeEvent struct {
	Event string   `json:"event"`
	T     float64  `json:"t"`
	IP    string   `json:"ip"`
	IPs   []string `json:"ips"`
	Error string   `json:"error"`
}

type probe struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	events chan probeEvent
	out    *rvtest.Buffer
	mu     sync.Mutex
	alive  map[string]time.Time // first time each IP was listed alive
}

// probe starts probeScript in mode through `head run`.
func (c *rayCluster) probe(t *testing.T, mode string, nodes int, limit time.Duration) *probe {
	t.Helper()
	script := filepath.Join(t.TempDir(), "probe.py")
	if err := os.WriteFile(script, []byte(probeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit+time.Minute)
	p := &probe{cancel: cancel, events: make(chan probeEvent, 4096), out: &rvtest.Buffer{}, alive: map[string]time.Time{}}
	p.cmd = exec.CommandContext(ctx, suite.head, "run", "--state", c.state, "--", "python", script, mode,
		fmt.Sprint(nodes), fmt.Sprint(int(limit.Seconds())))
	p.cmd.Stderr = p.out
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(p.out, sc.Text())
			var ev probeEvent
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			if ev.Event == "alive" {
				at := time.Unix(0, int64(ev.T*1e9))
				p.mu.Lock()
				for _, ip := range ev.IPs {
					if _, seen := p.alive[ip]; !seen {
						p.alive[ip] = at
					}
				}
				p.mu.Unlock()
				continue
			}
			select {
			case p.events <- ev:
			default:
			}
		}
		close(p.events)
	}()
	t.Cleanup(p.stop)
	return p
}

// next returns the next event named kind, waiting at most limit.
func (p *probe) next(limit time.Duration, kind string) (probeEvent, bool) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-p.events:
			if !ok {
				return ev, false
			}
			if ev.Event == kind {
				return ev, true
			}
		case <-timer.C:
			return probeEvent{}, false
		}
	}
}

func (p *probe) firstAlive() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]time.Time{}
	for k, v := range p.alive {
		out[k] = v
	}
	return out
}

func (p *probe) output() string { return lastLines(p.out.String(), 40) }

// timeline is the probe's JSON lines with their times made relative to t0.
func (p *probe) timeline(t0 time.Time) string {
	var b strings.Builder
	for _, l := range strings.Split(p.out.String(), "\n") {
		var ev probeEvent
		if json.Unmarshal([]byte(l), &ev) != nil || ev.Event == "" {
			continue
		}
		fmt.Fprintf(&b, "  %+6.1f %s %s %s\n", ev.T-float64(t0.UnixNano())/1e9, ev.Event, ev.IP, ev.Error)
	}
	return b.String()
}

func (p *probe) stop() {
	p.cancel()
	if p.cmd.Process != nil {
		_ = p.cmd.Wait()
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
