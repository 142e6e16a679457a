package main

// TestVastFlow is the issue's "done": against the fake vast API, `head
// serve --provider vast` with min_workers 2 rents, enrolls (agents running
// in local containers standing in for the rentals), replaces a candidate
// that failed its checks, ends a lost node, survives a restart without
// leaking or doubling rentals, and `head down` leaves nothing rented.
//
// It needs root and Docker (skips loudly otherwise; fails with CI=true).
// FAKEVAST_E2E_OVERLAY=file passes `-overlay file` to the head's build (to
// try wiring not yet in head/); FAKEVAST_E2E_LOGS=file keeps the logs.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/adminclient"
	"github.com/rayvast/rayvast/head/candidateimage"
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/dockerengine"
	"github.com/rayvast/rayvast/internal/rvtest"
	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

const e2eKey = "fakevast-e2e-key-5b2f9d1c0a8e"

type flow struct {
	t                *testing.T
	repo, bin        string
	head, agent      string
	state, cfg, vcfg string
	gw               string
	portA, portB     int
	env              []string
	fake             *fakevast.Server
	eng              *dockerengine.Client
	be               *fakevast.Docker // the fake's backend
	img              string           // the candidate image
	name             string
	logs             *rvtest.Buffer
	proc             *exec.Cmd
	done             chan error
	min, max         int    // the node type's workers (default 2 and 3)
	cfgExtra         string // more config fields, each with its leading comma
	fakeURL          string // the fake's API
	vastCPU          string // the vast settings' "cpu" node type (default a max_dph of 1)
	heartbeat        int    // heartbeat_interval_s (default 2)
	// wrap, when set, stands in front of the fake's handler (serveFake).
	wrap func(http.Handler) http.Handler
}

func TestVastFlow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	f := openFlow(ctx, t, "e2e", time.Minute)
	offers := fakevast.DefaultOffers(6)
	offers[0].Unsafe = true // the cheapest host keeps NET_RAW: its candidate must fail and be replaced
	f.setup(ctx, f.serveFake(fakevast.Config{Key: e2eKey, Offers: offers, StartDelay: 2 * time.Second, MinInterval: 50 * time.Millisecond}), f.img)

	// 1. Rent and enroll min_workers, replacing the unsafe host's candidate.
	f.start()
	// A spare rented after the failure may enroll in the same moment as the
	// replacement: 2 or 3 enrolled (max_workers 3), nothing else in flight.
	f.waitFor("2 enrolled nodes", 4*time.Minute, func(cs []wire.Candidate) bool { return count(cs, wire.StateEnrolled) >= 2 && inflight(cs) == 0 })
	cs := f.candidates()
	bad := find(cs, func(c wire.Candidate) bool { return c.HostID == "1001" })
	if bad == nil || bad.State != wire.StateEnded || bad.Reason != "security_check" {
		t.Fatalf("unsafe host's candidate = %+v, want ended security_check", bad)
	}
	if ok, bl := f.blocklisted("1001"); !ok {
		t.Errorf("host 1001 not blocklisted: %+v", bl)
	}
	f.checkNoLeak("after enrollment")
	f.checkFirewall(cs)

	// 2. Hosts die until one node is left: each is lost after 3 heartbeat
	// intervals, ended, its instance destroyed, and new ones are rented and
	// enrolled up to min_workers again.
	var victims []wire.Candidate
	for _, c := range cs {
		if c.State == wire.StateEnrolled && len(victims) < count(cs, wire.StateEnrolled)-1 {
			victims = append(victims, c)
			id, _ := strconv.ParseInt(c.InstanceID, 10, 64)
			if err := f.fake.Kill(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	known := map[string]bool{}
	for _, c := range cs {
		known[c.CandidateID] = true
	}
	f.waitFor("the killed nodes ended and 2 enrolled again", 3*time.Minute, func(cs []wire.Candidate) bool {
		for _, v := range victims {
			if c := find(cs, func(c wire.Candidate) bool { return c.CandidateID == v.CandidateID }); c == nil || c.State != wire.StateEnded {
				return false
			}
		}
		return count(cs, wire.StateEnrolled) >= 2 && inflight(cs) == 0
	})
	cs = f.candidates()
	for _, v := range victims {
		// Whichever sees it first ends it: the heartbeats' silence (lost)
		// or the leak sweep reading vast's "exited" (host_vanished).
		if c := find(cs, func(c wire.Candidate) bool { return c.CandidateID == v.CandidateID }); c.Reason != "lost" && c.Reason != "host_vanished (exited)" {
			t.Errorf("killed node %s: reason %q, want lost or host_vanished (exited)", c.CandidateID, c.Reason)
		}
		f.waitFor("a lost node's instance destroyed", time.Minute, func([]wire.Candidate) bool { return !f.live(v.InstanceID) })
	}
	if find(cs, func(c wire.Candidate) bool { return !known[c.CandidateID] && c.State == wire.StateEnrolled }) == nil {
		t.Error("no replacement enrolled after the lost nodes")
	}
	f.checkNoLeak("after the lost nodes")

	// 3. Restart: the head finds its rentals by label, keeps its nodes and
	// rents nothing twice.
	before, enrolled := len(f.fake.Live()), count(f.candidates(), wire.StateEnrolled)
	f.stop()
	lists := f.vastCalls(listCall)
	f.start()
	// The new head's first tick lists the rentals (to find its own by
	// label); every node then heartbeats it past the lost timeout (3
	// intervals) and the next tick: a head that rented again, swept its
	// own as leaks or lost its nodes has done so by then.
	f.waitEvent("the restarted head listed its rentals and took 5 heartbeats a node", time.Minute, func() bool {
		return f.vastCalls(listCall) > lists && f.heartbeats() >= 5*enrolled
	})
	if cs := f.candidates(); count(cs, wire.StateEnrolled) != enrolled {
		t.Errorf("after restart: %d enrolled, want %d", count(cs, wire.StateEnrolled), enrolled)
	}
	if after := len(f.fake.Live()); after != before {
		t.Errorf("after restart: %d instances, before %d", after, before)
	}
	f.checkNoLeak("after restart")

	// 4. head down: nothing stays rented.
	out, err := f.run(ctx, "down", "--state", f.state, "--config", f.cfg, "--provider", "vast")
	if err != nil {
		t.Fatalf("head down: %v\n%s", err, out)
	}
	if live := f.fake.Live(); len(live) != 0 {
		t.Errorf("after head down: %d instances still rented", len(live))
	}
	for _, c := range f.candidates() {
		if c.State != wire.StateEnded {
			t.Errorf("after head down: candidate %s is %s", c.CandidateID, c.State)
		}
	}
	// A down head lists its rentals every tick: after three more lists, a
	// whole tick has begun after the marker and ended (the third list is
	// the next tick's start). It must not have made a candidate or rented,
	// even one its next tick would end again.
	lists, rents := f.vastCalls(listCall), f.vastCalls(rentCall)
	f.waitEvent("a whole loop tick with the down marker", time.Minute, func() bool { return f.vastCalls(listCall) >= lists+3 })
	if n, live := f.vastCalls(rentCall)-rents, f.fake.Live(); n != 0 || len(live) != 0 {
		t.Errorf("the head rented again after head down: %d rentals, %d live", n, len(live))
	}
	if cs := f.candidates(); count(cs, wire.StateEnded) != len(cs) {
		n := len(cs) - count(cs, wire.StateEnded)
		t.Errorf("the head made candidates after head down: %d not ended", n)
	}
	f.stop()
	if cs, _ := f.eng.ListContainers(ctx, fakevast.LabelServer+"="+f.name); len(cs) != 0 {
		t.Errorf("%d containers left", len(cs))
	}
	if out, _ := exec.Command("nft", "list", "table", "inet", tableOf(f.state)).CombinedOutput(); !bytes.Contains(out, []byte("No such file")) {
		t.Errorf("firewall table left after the head stopped: %s", out)
	}
	f.checkSecrets()
	if p := os.Getenv("FAKEVAST_E2E_LOGS"); p != "" {
		_ = os.WriteFile(p, []byte(f.logs.String()), 0o600)
	}
	calls, limited := f.fake.Stats()
	t.Logf("vast API calls %v, 429s %d", calls, limited)
}

// openFlow is the start both flows share: root and Docker (or the gate),
// the binaries, the candidate image, and the fake's Docker backend, which
// is cleaned up (within cleanup) when the test ends.
func openFlow(ctx context.Context, t *testing.T, name string, cleanup time.Duration) *flow {
	rvtest.NeedDocker(t) // the flow runs Docker containers, and nftables as root
	eng := dockerengine.New("")
	repo := rvtest.ModuleRoot(t)
	f := &flow{t: t, repo: repo, bin: t.TempDir(), eng: eng, name: fmt.Sprintf("%s%d", name, os.Getpid()), logs: &rvtest.Buffer{}}
	f.build(ctx)
	img, err := candidateimage.Build(ctx, candidateimage.Config{Engine: eng, FakerayDir: filepath.Join(repo, "test", "fakeray")})
	if err != nil {
		t.Fatal(err)
	}
	f.img = img
	_ = fakevast.Cleanup(ctx, eng, f.name)
	be, err := fakevast.OpenDocker(ctx, fakevast.DockerConfig{Engine: eng, Name: f.name, Image: img})
	if err != nil {
		t.Fatal(err)
	}
	f.be = be
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), cleanup)
		defer cancel()
		if err := fakevast.Cleanup(c, eng, f.name); err != nil {
			t.Logf("cleanup: %v", err)
		}
		be.Close()
	})
	return f
}

// serveFake serves the fake vast API (cfg with the flow's backend and log)
// until the test ends, and returns its URL.
func (f *flow) serveFake(cfg fakevast.Config) string {
	cfg.Backend, cfg.Log = f.be, slogFor(f)
	f.fake = fakevast.New(cfg)
	h := f.fake.Handler()
	if f.wrap != nil {
		h = f.wrap(h)
	}
	api := httptest.NewServer(h)
	f.t.Cleanup(api.Close)
	f.gw = f.be.Gateway().String()
	f.fakeURL = api.URL
	return api.URL
}

func slogFor(f *flow) *slog.Logger {
	return slog.New(slog.NewTextHandler(f.logs, nil)).With("who", "fakevast")
}

func (f *flow) build(ctx context.Context) {
	f.head, f.agent = rvtest.Build(f.t, f.bin, "./head"), rvtest.Build(f.t, f.bin, "./agent")
}

// freePort is a port on ip the head binds next, from outside the ephemeral
// range: the port checks' connections from the gateway IP cannot take it.
func freePort(t *testing.T, ip string) int {
	t.Helper()
	return rvtest.FreePort(t, ip)
}

func (f *flow) setup(ctx context.Context, apiURL, img string) {
	dir := f.t.TempDir()
	f.state, f.cfg, f.vcfg = filepath.Join(dir, "state"), filepath.Join(dir, "config.json"), filepath.Join(dir, "vast.json")
	if out, err := f.run(ctx, "init", "--state", f.state, "--ip", f.gw, "--cluster", f.name); err != nil {
		f.t.Fatalf("head init: %v\n%s", err, out)
	}
	cfg := fmt.Sprintf(`{"cluster":%q,"ray":{"head_address":"%s:6379"},"heartbeat_interval_s":%d%s,
		"node_types":{"cpu":{"gpus":0,"min_workers":%d,"max_workers":%d,"resources":{},"labels":{}}},
		"guest_api":{"anonymous_scopes":[],"external_issuers":[]}}`, f.name, f.gw, cmp.Or(f.heartbeat, 2), f.cfgExtra, max(f.min, 2), max(f.max, 3))
	cpu := f.vastCPU
	if cpu == "" {
		cpu = `"gpu_name":"fake-cpu","max_dph":1`
	}
	vcfg := fmt.Sprintf(`{"image":%q,"node_types":{"cpu":{%s}}}`, img, cpu)
	for p, s := range map[string]string{f.cfg: cfg, f.vcfg: vcfg} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			f.t.Fatal(err)
		}
	}
	f.portA, f.portB = freePort(f.t, f.gw), freePort(f.t, f.gw)
	f.env = append(os.Environ(), "VAST_API_KEY="+e2eKey, "RAYVAST_VAST_URL="+apiURL, "RAYVAST_VAST_CONFIG="+f.vcfg)
}

func (f *flow) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, f.head, args...)
	cmd.Env = f.env
	out, err := cmd.CombinedOutput()
	f.logs.Write(out)
	return out, err
}

func (f *flow) start() {
	cmd := exec.Command(f.head, "serve", "--state", f.state, "--config", f.cfg, "--agent", f.agent,
		"--listen-a", net.JoinHostPort(f.gw, strconv.Itoa(f.portA)), "--listen-b", net.JoinHostPort(f.gw, strconv.Itoa(f.portB)),
		"--provider", "vast")
	cmd.Env = f.env
	cmd.Stdout, cmd.Stderr = f.logs, f.logs
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.proc, f.done = cmd, make(chan error, 1)
	go func() { f.done <- cmd.Wait() }()
	f.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		// A killed head leaves its table: remove it (guards only this
		// test's ephemeral ports, but do not leave it behind).
		_ = firewall.Remove(context.Background(), tableOf(f.state), nil)
	})
	sock := filepath.Join(f.state, statedir.AdminSocket)
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		select {
		case err := <-f.done:
			f.t.Fatalf("head serve exited: %v\n%s", err, f.logs.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	f.t.Fatalf("head serve did not open its admin socket\n%s", f.logs.String())
}

func (f *flow) stop() {
	_ = f.proc.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-f.done:
		if err != nil {
			f.t.Errorf("head serve exit: %v", err)
		}
	case <-time.After(45 * time.Second):
		f.t.Fatal("head serve did not stop on SIGTERM")
	}
}

func (f *flow) admin() *adminclient.Client {
	return adminclient.Unix(filepath.Join(f.state, statedir.AdminSocket), 10*time.Second)
}

func (f *flow) candidates() []wire.Candidate {
	cs, err := f.admin().Candidates(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return cs
}

// blocklisted says whether the running head blocklists hostID, and shows
// its blocklist.
func (f *flow) blocklisted(hostID string) (bool, []wire.BlockEntry) {
	bl, err := f.admin().Blocklist(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range bl {
		if e.HostID == hostID {
			return true, bl
		}
	}
	return false, bl
}

// waitFor waits until the head's candidates satisfy ok.
func (f *flow) waitFor(what string, d time.Duration, ok func([]wire.Candidate) bool) {
	f.t.Helper()
	f.waitEvent(what, d, func() bool { return ok(f.candidates()) })
}

// The fake's names of the head's listing of its rentals and of a rental.
const (
	listCall = "GET /api/v1/instances/"
	rentCall = "PUT /api/v0/asks/{id}/"
)

// vastCalls is how many calls the fake served of one kind (listCall).
func (f *flow) vastCalls(kind string) int {
	calls, _ := f.fake.Stats()
	return calls[kind]
}

// heartbeats is the running head's rayvast_heartbeats_total (0 after a
// restart).
func (f *flow) heartbeats() int {
	text, err := f.admin().Metrics(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, "rayvast_heartbeats_total "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// waitEvent waits for something the head does that a negative check
// needs to have happened first: waiting on it, not on a sleep, keeps the
// check meaningful on a slow machine.
func (f *flow) waitEvent(what string, d time.Duration, ok func() bool) {
	f.t.Helper()
	if rvtest.Until(d, ok) {
		f.t.Logf("reached: %s", what)
		return
	}
	b, _ := json.MarshalIndent(f.candidates(), "", " ")
	f.t.Fatalf("timed out waiting for %s\ncandidates: %s\nlogs:\n%s", what, b, tail(f.logs.String(), 8000))
}

func (f *flow) live(instanceID string) bool {
	for _, in := range f.fake.Live() {
		if strconv.FormatInt(in.ID, 10) == instanceID {
			return true
		}
	}
	return false
}

// checkNoLeak: every rented instance belongs to a live candidate, and every
// live candidate with an instance is rented.
func (f *flow) checkNoLeak(when string) {
	f.t.Helper()
	cs := f.candidates()
	liveCand := map[string]bool{}
	for _, c := range cs {
		if c.State != wire.StateEnded && c.InstanceID != "" {
			liveCand[c.InstanceID] = true
			if !f.live(c.InstanceID) {
				f.t.Errorf("%s: candidate %s (%s) has no instance %s", when, c.CandidateID, c.State, c.InstanceID)
			}
		}
	}
	for _, in := range f.fake.Live() {
		if id := strconv.FormatInt(in.ID, 10); !liveCand[id] {
			// A destroy may be in flight for an instance just ended.
			time.Sleep(3 * time.Second)
			if f.live(id) {
				f.t.Errorf("%s: instance %s (label %s) has no live candidate", when, id, in.Label)
			}
		}
	}
}

func (f *flow) checkFirewall(cs []wire.Candidate) {
	out, err := exec.Command("nft", "list", "set", "inet", tableOf(f.state), "allowed4").CombinedOutput()
	if err != nil {
		f.t.Errorf("nft list set: %v: %s", err, out)
		return
	}
	for _, c := range cs {
		if c.State == wire.StateEnrolled && !bytes.Contains(out, []byte(c.PublicIP)) {
			f.t.Errorf("enrolled node %s (%s) not in the firewall set:\n%s", c.CandidateID, c.PublicIP, out)
		}
	}
}

// checkSecrets: neither the API key nor any join token reached a log line.
func (f *flow) checkSecrets() {
	logs := f.logs.String()
	if strings.Contains(logs, e2eKey) {
		f.t.Error("the vast API key is in the logs")
	}
	for _, in := range f.fake.AllInstances() {
		if tok := in.Env[wire.EnvJoinToken]; tok != "" && strings.Contains(logs, tok) {
			f.t.Errorf("join token of instance %d in the logs", in.ID)
		}
		for k, v := range in.Env {
			if strings.Contains(k+v, e2eKey) {
				f.t.Errorf("API key in the rental env of %d", in.ID)
			}
		}
	}
}

func count(cs []wire.Candidate, state string) int {
	n := 0
	for _, c := range cs {
		if c.State == state {
			n++
		}
	}
	return n
}

func inflight(cs []wire.Candidate) int {
	return count(cs, wire.StatePending) + count(cs, wire.StateRented) + count(cs, wire.StateRunning)
}

func find(cs []wire.Candidate, ok func(wire.Candidate) bool) *wire.Candidate {
	for i := range cs {
		if ok(cs[i]) {
			return &cs[i]
		}
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
