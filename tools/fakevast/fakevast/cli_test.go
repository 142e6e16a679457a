package fakevast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
)

// cliStep is one request of testdata/cli_requests.json: what the official
// CLI (vast-ai/vast-cli vast.py, named in "source") sends for "cli", and a
// subset of the answer vast documents.
type cliStep struct {
	Name   string          `json:"name"`
	CLI    string          `json:"cli"`
	Source string          `json:"source"`
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Query  string          `json:"query"`
	Body   json.RawMessage `json:"body"`
	Status int             `json:"status"`
	Want   json.RawMessage `json:"want"`
}

func loadCLISteps(t *testing.T) []cliStep {
	t.Helper()
	b, err := os.ReadFile("testdata/cli_requests.json")
	if err != nil {
		t.Fatal(err)
	}
	var steps []cliStep
	if err := json.Unmarshal(b, &steps); err != nil {
		t.Fatal(err)
	}
	return steps
}

// subset reports where want is not contained in have: objects by key,
// arrays element by element with equal length, scalars equal.
func subset(path string, want, have any) error {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, have %v", path, have)
		}
		for k, v := range w {
			hv, ok := h[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing", path, k)
			}
			if err := subset(path+"."+k, v, hv); err != nil {
				return err
			}
		}
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return fmt.Errorf("%s: want %d elements, have %v", path, len(w), have)
		}
		for i := range w {
			if err := subset(fmt.Sprintf("%s[%d]", path, i), w[i], h[i]); err != nil {
				return err
			}
		}
	default:
		if !reflect.DeepEqual(want, have) {
			return fmt.Errorf("%s: want %v, have %v", path, want, have)
		}
	}
	return nil
}

// TestCLIRequests replays the CLI's requests against the fake in order
// (search with string filters, creates with --entrypoint/--args, v1 pages,
// limits refused, destroy, a gone instance shown and destroyed, api_key in
// the query) and checks every answer against vast's documented shape.
func TestCLIRequests(t *testing.T) {
	backend := &memBackend{launches: map[int64]Launch{}, stopped: map[int64]bool{}}
	s := New(Config{Key: "k3y", NoLimits: true, Backend: backend})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	next := ""
	for _, st := range loadCLISteps(t) {
		q := strings.ReplaceAll(st.Query, "$next_token", next)
		q = strings.ReplaceAll(q, "$key", "k3y")
		u := srv.URL + st.Path
		if q != "" {
			u += "?" + q
		}
		var body io.Reader
		if st.Body != nil {
			body = bytes.NewReader(st.Body)
		}
		req, _ := http.NewRequest(st.Method, u, body)
		if !strings.Contains(q, "api_key=") {
			req.Header.Set("Authorization", "Bearer k3y")
		}
		if st.Body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", st.Name, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != st.Status {
			t.Fatalf("%s (%s): status %d, want %d: %s", st.Name, st.CLI, resp.StatusCode, st.Status, raw)
		}
		var have map[string]any
		if err := json.Unmarshal(raw, &have); err != nil {
			t.Fatalf("%s: answer is not JSON: %s", st.Name, raw)
		}
		if tok, ok := have["next_token"].(string); ok {
			next = tok
		}
		if st.Want != nil {
			var want any
			_ = json.Unmarshal(st.Want, &want)
			if err := subset("answer", want, have); err != nil {
				t.Errorf("%s (%s, from %s): %v", st.Name, st.CLI, st.Source, err)
			}
		}
	}
	s.Wait()
	// What vast would run: the image's ENTRYPOINT replaced by onstart, the
	// args after it, only the two ports asked for.
	l := backend.launches[31000001]
	if l.Entrypoint != "/bin/sh" || !reflect.DeepEqual(l.Args, []string{"-c", "echo hi"}) || len(l.Ports) != 2 || l.Env["A"] != "1" {
		t.Errorf("launch = entrypoint %q args %q ports %d env %v; want /bin/sh [-c echo hi], 2 ports", l.Entrypoint, l.Args, len(l.Ports), l.Env)
	}
	if len(backend.launches) != 4 {
		t.Errorf("%d launches, want 4 (three on demand, one bid; the refused creates and the bid that started stopped run nothing)", len(backend.launches))
	}
	if _, ran := backend.launches[31000004]; ran {
		t.Error("the bid below min_bid ran: vast starts it stopped")
	}
}
