package enroll

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestEnrollBusyThenRetry proves a port check that found no turn in time
// (ErrBusy, a full gate) costs the candidate nothing: 503 {"error":"busy"}
// with Retry-After, nothing destroyed or blocklisted, the candidate still
// running; and the agent's retry with the same request enrolls it.
func TestEnrollBusyThenRetry(t *testing.T) {
	h := newHead(t)
	h.busy = 1
	c, tok, a := h.candidate(t, "inst-busy", "127.0.0.61", "gpu1", fakeagent.Answer)
	req := a.Request("inst-busy", tok.Reveal(), 1)

	b, _ := json.Marshal(req)
	hc := fakeagent.Client("127.0.0.61", h.ca.Pool(), nil)
	resp, err := hc.Post(h.url+"/enroll", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb wire.ErrorBody
	if json.Unmarshal(body, &eb) != nil || eb.Error != wire.ErrBusy {
		t.Fatalf("busy body %s, want error %q", body, wire.ErrBusy)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("busy answer: %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, blocked := h.block.Blocked("host-inst-busy"); len(h.destroyed) != 0 || blocked {
		t.Fatalf("busy destroyed %v or blocklisted the host", h.destroyed)
	}
	if st := h.state(c.CandidateID); st != wire.StateRunning {
		t.Fatalf("candidate state after busy = %q, want it still live", st)
	}

	if st, body := h.post(t, "127.0.0.61", req); st != 200 {
		t.Fatalf("retry after busy: %d %s, want 200", st, body)
	}
	if st := h.state(c.CandidateID); st != wire.StateEnrolled {
		t.Fatalf("state after the retry = %q, want enrolled", st)
	}
	// A stranger's replay of the consumed token (another port_key) is
	// still refused after the postponement.
	other := a.Request("inst-busy", tok.Reveal(), 1)
	other.PortKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))
	if st, body := h.post(t, "127.0.0.61", other); st != 403 || !strings.Contains(body, wire.ErrRefused) {
		t.Fatalf("replay with another port_key: %d %s, want 403 refused", st, body)
	}
}
