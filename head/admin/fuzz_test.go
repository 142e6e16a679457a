package admin

import (
	"bytes"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/blocklist"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/wire"
)

// FuzzAdminBodies: whatever the body of POST /v1/candidates or PATCH
// /v1/candidates/{id}, the admin API answers one of its documented codes and
// never panics.
//
//	go test -run '^$' -fuzz FuzzAdminBodies -fuzztime 30s ./head/admin
func FuzzAdminBodies(f *testing.F) {
	reg, _ := registry.Open(registry.Config{})
	block := blocklist.New(time.Now)
	block.Add("bad", wire.BlockNetwork, wire.ReasonEgress)
	s := New(Config{Registry: reg, Blocklist: block, Rentals: &fakeRentals{reg: reg},
		NodeTypes: map[string]wire.NodeType{"gpu1": {GPUs: 1, MaxWorkers: 1}}})
	h := s.Handler()
	c, _, _ := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu1"})
	for _, seed := range []string{`{"node_type":"gpu1"}`, `{"node_type":"gpu1","instance_id":"i1","public_ip":"::ffff:1.2.3.4","host_id":"bad"}`,
		`{"instance_id":"i2"}`, `{"public_ip":"fe80::1%eth0"}`, `null`, `[]`, ``, `{"node_type":1}`} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, body string, create bool) {
		method, path, ok := "PATCH", "/v1/candidates/"+c.CandidateID, map[int]bool{200: true, 400: true, 404: true, 409: true, 413: true}
		if create {
			method, path, ok = "POST", "/v1/candidates", map[int]bool{201: true, 400: true, 409: true, 413: true}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, bytes.NewReader([]byte(body))))
		if !ok[rec.Code] {
			t.Fatalf("%s %s %q: status %d %s", method, path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("error answer is not JSON: %v", rec.Header())
		}
	})
}
