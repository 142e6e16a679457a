package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// Issue 31's "done", against the fake vast API with agents in containers:
// heartbeat_interval_s 2, unheard_limit_s 20.
const (
	selfEndInterval = 2 * time.Second
	selfEndLimit    = 20 * time.Second
)

// TestNodesEndThemselvesWhenTheHeadIsGone proves, in order:
//   - a node's CONTAINER_API_KEY is refused on another instance (404
//     auth_error), and that instance keeps running;
//   - a head restarted inside the window keeps every node: nothing is
//     destroyed, and the same nodes heartbeat again;
//   - a head killed and not restarted: every rental is destroyed by its
//     own node (the destroy came with the instance's own key) within the
//     window plus one heartbeat interval (and the jitter) of the kill.
func TestNodesEndThemselvesWhenTheHeadIsGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := openFlow(ctx, t, "selfend", time.Minute)
	f.cfgExtra = `,"unheard_limit_s":` + strconv.Itoa(int(selfEndLimit/time.Second))
	f.setup(ctx, f.serveFakeOnGateway(fakevast.Config{Key: e2eKey, Offers: fakevast.DefaultOffers(4), StartDelay: time.Second, MinInterval: 50 * time.Millisecond}), f.img)
	f.start()
	f.waitFor("2 enrolled nodes", 4*time.Minute, func(cs []wire.Candidate) bool { return count(cs, wire.StateEnrolled) >= 2 && inflight(cs) == 0 })
	live := f.fake.Live()
	if len(live) < 2 {
		t.Fatalf("live instances %d, want 2 or more", len(live))
	}

	// A node's key on another instance: refused, nothing destroyed.
	if st := vastDelete(ctx, t, f.fakeURL, live[1].ID, f.fake.InstanceKey(live[0].ID)); st != http.StatusNotFound {
		t.Errorf("instance %d's key destroying %d: status %d, want 404", live[0].ID, live[1].ID, st)
	}
	if !f.live(strconv.FormatInt(live[1].ID, 10)) {
		t.Fatal("another node's key destroyed an instance")
	}

	// A head restarted inside the window keeps every node.
	f.stop()
	time.Sleep(3 * selfEndInterval) // every node misses beats, well inside the window
	f.start()
	beats := f.heartbeats()
	f.waitEvent("the nodes heartbeat the restarted head", time.Minute, func() bool { return f.heartbeats() >= beats+2*len(live) })
	if got := f.fake.Live(); len(got) != len(live) {
		t.Fatalf("after a restart inside the window: %d live instances, want %d", len(got), len(live))
	}
	for _, c := range f.candidates() {
		if c.State != wire.StateEnrolled && c.InstanceID != "" && f.live(c.InstanceID) {
			t.Errorf("candidate %s %s after the restart", c.CandidateID, c.State)
		}
	}
	live = f.fake.Live()

	// The head killed, not restarted: each node ends its own rental.
	_ = f.proc.Process.Kill()
	<-f.done
	killed := time.Now()
	// The window plus one heartbeat interval and its jitter; slack for the
	// destroy call itself and a loaded machine's timers (measured: 20.2 s
	// and 21.4 s on a quiet one).
	bound := selfEndLimit + selfEndInterval + selfEndInterval/10
	const slack = 2 * time.Second
	deadline := killed.Add(bound + 30*time.Second) // the wait; the bound is checked on vast's record below
	for len(f.fake.Live()) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	byID := map[int64]fakevast.Instance{}
	for _, in := range f.fake.AllInstances() {
		byID[in.ID] = in
	}
	for _, in := range live {
		got := byID[in.ID]
		switch {
		case !got.Destroyed:
			t.Errorf("instance %d still rented %v after the head was killed", in.ID, time.Since(killed).Round(time.Second))
		case !got.DestroyedByOwnKey:
			t.Errorf("instance %d destroyed, but not with its own key", in.ID)
		default:
			took := got.DestroyedAt.Sub(killed)
			t.Logf("instance %d destroyed by its own node %v after the head was killed (bound %v)", in.ID, took.Round(100*time.Millisecond), bound)
			if took > bound+slack {
				t.Errorf("instance %d destroyed %v after the kill, past the window plus one interval (%v)", in.ID, took, bound)
			}
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", tail(f.logs.String(), 8000))
	}
}

// serveFakeOnGateway is serveFake, and the same fake on the Docker
// network's gateway too, so the agents in the containers reach it
// (RAYVAST_VAST_URL); the head takes plain http only on loopback.
func (f *flow) serveFakeOnGateway(cfg fakevast.Config) string {
	f.gw = f.be.Gateway().String()
	ln, err := net.Listen("tcp", net.JoinHostPort(f.gw, "0"))
	if err != nil {
		f.t.Fatal(err)
	}
	cfg.ContainerURL = "http://" + ln.Addr().String()
	cfg.Backend, cfg.Log = f.be, slogFor(f)
	f.fake = fakevast.New(cfg)
	gw := httptest.NewUnstartedServer(f.fake.Handler())
	gw.Listener.Close()
	gw.Listener = ln
	gw.Start()
	f.t.Cleanup(gw.Close)
	api := httptest.NewServer(f.fake.Handler())
	f.t.Cleanup(api.Close)
	f.fakeURL = api.URL
	return api.URL
}

func vastDelete(ctx context.Context, t *testing.T, base string, id int64, key string) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/api/v0/instances/"+strconv.FormatInt(id, 10)+"/", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
