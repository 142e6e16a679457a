package teardown

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// TestDownDestroysWhenEndFails: a running head that cannot end its
// candidates (every DELETE fails) does not keep `head down` from
// destroying the rentals by label; the failure is still reported.
func TestDownDestroysWhenEndFails(t *testing.T) {
	dir := t.TempDir()
	reg, adm := newAdmin(t)
	h := adm.Handler()
	if _, _, err := reg.NewCandidate(wire.CandidateRequest{NodeType: "gpu"}); err != nil {
		t.Fatal(err)
	}
	broken := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			http.Error(w, `{"error":"internal"}`, http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	})
	serveAdmin(t, dir, broken)
	rs := &listRentals{live: map[string]bool{"21": true}}
	rep, err := Down(context.Background(), Config{StateDir: dir, Rentals: rs, Timeout: 2 * time.Second, Poll: 10 * time.Millisecond})
	if err == nil {
		t.Error("Down = nil error, want the candidates that stayed live reported")
	}
	if len(rep.Destroyed) != 1 || len(rs.live) != 0 {
		t.Errorf("destroyed %v, still rented %v: want rental 21 destroyed", rep.Destroyed, rs.live)
	}
}
