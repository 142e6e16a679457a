package enroll

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/ratelimit"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// FuzzEnrollBody: whatever the body, POST /enroll answers 400, 403 or 413,
// never panics, and destroys nothing (a stranger cannot guess the token).
//
//	go test -run '^$' -fuzz FuzzEnrollBody -fuzztime 30s ./head/enroll
func FuzzEnrollBody(f *testing.F) {
	ca, _, _ := pki.NewCA(nil, "fuzz", time.Now())
	reg, _ := registry.Open(registry.Config{})
	c, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1", InstanceID: "i1", PublicIP: "192.0.2.1"})
	destroyed := 0
	s := New(Config{Registry: reg, Blocklist: blocklist.New(time.Now), Limiter: ratelimit.New(1<<30, time.Second, nil),
		PortCheck: func(context.Context, string, []int, []byte) error { return nil },
		CA:        ca, NodeTypes: nodeTypes, Destroy: func(string, string) { destroyed++ }})
	h := s.Handler()
	ports := make([]int, 64)
	for i := range ports {
		ports[i] = 20000 + i
	}
	good, _ := json.Marshal(wire.EnrollRequest{Version: 2, InstanceID: "i1", JoinToken: strings.Repeat("A", 43), GPUs: 1,
		Ports: ports, PortKey: "c2VjcmV0LXBvcnQta2V5LTMyLWJ5dGVzLWxvbmchISE="})
	for _, seed := range [][]byte{good, []byte("{}"), []byte(`{"version":2,"ports":[1,1]}`), []byte("null"), []byte(`[]`), nil} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/enroll", bytes.NewReader(body))
		req.RemoteAddr = "192.0.2.1:5555"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 400, 403, 413:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if destroyed != 0 {
			t.Fatal("a body without the token destroyed a candidate")
		}
		if got, _ := reg.Candidate(c.CandidateID); got.State != wire.StateRunning {
			t.Fatalf("candidate is %s", got.State)
		}
	})
}
