package enroll

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rayvast/rayvast/head/internal/fakeagent"
	"github.com/rayvast/rayvast/internal/wire"
)

// TestRateLimitOnlyRefusals: vast hosts share public IPs, so a co-tenant can
// send refusals from the very IP a real candidate enrolls from. The limit
// must turn only refusals into 429: the candidate's own good request still
// enrolls, and a malformed request is still told it is malformed.
func TestRateLimitOnlyRefusals(t *testing.T) {
	h := newHead(t)
	const ip = "127.0.4.1"
	_, tok, a := h.candidate(t, "inst-shared", ip, "gpu1", fakeagent.Answer)
	junk := a.Request("inst-shared", strings.Repeat("C", 43), 1)
	for i := range 10 {
		if st, body := h.post(t, ip, junk); st != 403 || body != `{"error":"refused"}` {
			t.Fatalf("refusal %d: %d %s, want 403 refused", i+1, st, body)
		}
	}
	if st, _ := h.post(t, ip, junk); st != 429 {
		t.Fatalf("11th refusal: %d, want 429", st)
	}
	if st, body := h.post(t, ip, []byte("{nope")); st != 400 {
		t.Errorf("malformed from a limited ip: %d %s, want 400", st, body)
	}
	if st, body := h.post(t, ip, a.Request("inst-shared", tok.Reveal(), 1)); st != 200 {
		t.Errorf("the real candidate behind a limited shared ip: %d %s, want 200", st, body)
	}
}

// TestOversizeIs413: SPEC §4 says any body over 64 KiB is 413, whatever it
// holds; a large body of garbage must not be answered 400.
func TestOversizeIs413(t *testing.T) {
	h := newHead(t)
	cl := fakeagent.Client("127.0.4.2", h.ca.Pool(), nil)
	for _, c := range []struct {
		name  string
		body  []byte
		chunk bool // no Content-Length
	}{
		{"garbage with length", bytes.Repeat([]byte("x"), 70<<10), false},
		{"garbage chunked", bytes.Repeat([]byte("x"), 70<<10), true},
		{"json then 64 KiB of junk", append([]byte(`{"version":1}`), bytes.Repeat([]byte("!"), 65<<10)...), false},
		{"just over", bytes.Repeat([]byte(" "), wire.MaxBody+1), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(c.body)
			if c.chunk {
				body = io.MultiReader(body) // hides the length: chunked
			}
			req, _ := http.NewRequest("POST", h.url+"/enroll", body)
			req.Header.Set("Content-Type", "application/json")
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 413 {
				t.Errorf("status %d %s, want 413", resp.StatusCode, b)
			}
		})
	}
	// Exactly 64 KiB is allowed: it is judged on its content (400 here).
	exact := append([]byte(`{"version":1}`), bytes.Repeat([]byte(" "), wire.MaxBody-len(`{"version":1}`))...)
	if st, body := h.post(t, "127.0.4.2", exact); st != 400 {
		t.Errorf("64 KiB body: %d %s, want 400", st, body)
	}
}

// TestUncleanPaths404: a path the table does not name is 404, including
// spellings that would clean to a known path (no 301 redirect dance).
func TestUncleanPaths404(t *testing.T) {
	h := newHead(t)
	cl := fakeagent.Client("127.0.4.3", h.ca.Pool(), nil)
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	host := strings.TrimPrefix(h.url, "https://")
	for _, c := range []struct{ method, path string }{
		{"POST", "//enroll"}, {"POST", "/./enroll"}, {"POST", "/x/../enroll"}, {"GET", "/ca.pem/"},
		{"GET", "//bootstrap"}, {"POST", "/enroll/"}, {"GET", "/CA.PEM"},
	} {
		req, _ := http.NewRequest(c.method, h.url+"/", strings.NewReader("{}"))
		req.URL.Opaque = "//" + host + c.path // sent as written
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s %s: %d, want 404", c.method, c.path, resp.StatusCode)
		}
	}
}
