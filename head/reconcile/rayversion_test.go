package reconcile

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestRayVersionPausesRenting: candidates refused ray_version (a wrong
// image: every rental fails alike) count toward the pause, and the pause's
// log line says it is the image's Ray or Python. Other end reasons that
// are not failures do not count.
func TestRayVersionPausesRenting(t *testing.T) {
	for _, c := range []struct {
		reason string
		pause  bool
	}{
		{wire.ReasonRayVersion, true},
		{wire.ReasonSharedIP, true},
		{wire.ReasonNoSlot, false},
		{ReasonScaleDown, false},
	} {
		t.Run(c.reason, func(t *testing.T) {
			cl := &fakeCluster{}
			for _, id := range []string{"f1", "f2", "f3"} {
				cl.cands = append(cl.cands, ended(id, "gpu", c.reason, time.Minute))
			}
			var logs bytes.Buffer
			l := New(Config{Cluster: cl, NodeTypes: map[string]wire.NodeType{"gpu": {MinWorkers: 1, MaxWorkers: 2}}, MaxFailures: 3,
				Now: func() time.Time { return t0 }, Log: slog.New(slog.NewTextHandler(&logs, nil))})
			res, err := l.Tick(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if paused := res.Created["gpu"] == 0; paused != c.pause {
				t.Errorf("created %d, paused %v; want paused %v", res.Created["gpu"], paused, c.pause)
			}
			if !c.pause {
				return
			}
			want := `reasons="` + c.reason + `=3"`
			if !strings.Contains(logs.String(), want) {
				t.Errorf("pause log lacks %q:\n%s", want, logs.String())
			}
			hint := strings.Contains(logs.String(), "node image's Ray or Python")
			if hint != (c.reason == wire.ReasonRayVersion) {
				t.Errorf("ray_version hint shown %v for %s:\n%s", hint, c.reason, logs.String())
			}
		})
	}
}

func TestReasonList(t *testing.T) {
	if got := reasonList(map[string]int{"egress": 2, "ray_version": 7, "lost": 2}); got != "ray_version=7,egress=2,lost=2" {
		t.Errorf("got %q", got)
	}
}
