package heartbeat

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/internal/wire"
)

type fakeMesh struct {
	mu      sync.Mutex
	version string
	updates []wire.MeshMembers
}

func (m *fakeMesh) Version() string { m.mu.Lock(); defer m.mu.Unlock(); return m.version }
func (m *fakeMesh) Update(mm wire.MeshMembers) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version = mm.Version
	m.updates = append(m.updates, mm)
}

// TestMeshThroughHeartbeats proves the heartbeat loop's part of the mesh:
// each beat names the membership version the node holds, a reply's
// membership reaches the mesh, and a kick (the mesh met an address it
// does not know) makes a beat at once, out of a long wait, and is answered
// only once that beat's membership is in.
func TestMeshThroughHeartbeats(t *testing.T) {
	f := &fakePortB{answer: func(seq int64) (int, wire.HeartbeatReply) {
		r := wire.HeartbeatReply{IntervalS: 3600, Action: wire.ActionNone}
		switch seq {
		case 1:
			r.Mesh = &wire.MeshMembers{Version: "v1", Peers: []wire.MeshMember{}}
		case 2:
			r.Mesh = &wire.MeshMembers{Version: "v2", Peers: []wire.MeshMember{{InstanceID: "n2", PublicIP: "127.0.0.9", MeshPort: 1}}}
		}
		return 200, r
	}}
	hc, url := setup(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &fakeMesh{}
	kick := make(chan chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Client: hc, BaseURL: url, InstanceID: "inst-1", Interval: time.Hour,
			Status: func() wire.RayStatus { return wire.RayStatus{State: wire.RayRunning} },
			Mesh:   m, Kick: kick, Sleep: backoff.Sleep})
	}()
	waitFor(t, func() bool { return m.Version() == "v1" })
	answered := make(chan struct{})
	select {
	case kick <- answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop took no kick while waiting an hour")
	}
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("a kick was not answered")
	}
	if v := m.Version(); v != "v2" {
		t.Errorf("after the kick's answer the mesh holds %q, want v2 (the kick is answered after its beat's membership)", v)
	}
	f.mu.Lock()
	beats := append([]wire.Heartbeat(nil), f.beats...)
	f.mu.Unlock()
	if len(beats) != 2 || beats[0].MeshVersion != "" || beats[1].MeshVersion != "v1" {
		t.Errorf("beats named mesh versions %+v, want \"\" then v1", beats)
	}
	cancel()
	<-done
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatal("condition not met in 10 s")
}
