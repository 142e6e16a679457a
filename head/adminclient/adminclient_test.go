package adminclient

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/statedir"
)

// TestUnix proves the socket client carries the JSON body, checks the
// status and decodes the answer, and that a wrong status names the answer.
func TestUnix(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		if r.Method == http.MethodPost {
			if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&in) != nil {
				http.Error(w, "bad body", 400)
				return
			}
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]string{"echo": in["x"], "path": r.URL.Path})
			return
		}
		http.Error(w, `{"error":"nope"}`, http.StatusConflict)
	})
	sock := filepath.Join(t.TempDir(), statedir.AdminSocket)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	c := Unix(sock, 5*time.Second)
	var out map[string]string
	if err := c.do(t.Context(), http.MethodPost, "/v1/candidates", map[string]string{"x": "y"}, &out, http.StatusCreated); err != nil {
		t.Fatal(err)
	}
	if out["echo"] != "y" || out["path"] != "/v1/candidates" {
		t.Errorf("got %v", out)
	}
	err = c.do(t.Context(), http.MethodGet, "/v1/nodes", nil, nil, http.StatusOK)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "nope") {
		t.Errorf("wrong status: err = %v, want one naming 409 and the answer", err)
	}
}
