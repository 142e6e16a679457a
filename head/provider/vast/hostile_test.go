package vast

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/secret"
)

// listing serves one fixed instance list (and show of instance 7).
func listing(t *testing.T, body string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v0/instances/7/" {
			io.WriteString(w, `{"instances":{"id":7,"actual_status":"running","label":"rayvast:a:c-1","public_ipaddr":"1.2.3.4; rm -rf /","host_id":3,"machine_id":4}}`)
			return
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(ClientConfig{BaseURL: srv.URL, Key: secret.New(testKey)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestListTakesOnlyThisCluster: cluster "a" does not claim the rentals of
// cluster "a:b" (whose labels start with "rayvast:a:" too): its leak sweep
// would destroy them.
func TestListTakesOnlyThisCluster(t *testing.T) {
	c := listing(t, `{"instances":[
		{"id":1,"actual_status":"running","label":"rayvast:a:c-1","public_ipaddr":"203.0.113.1","host_id":3,"machine_id":4},
		{"id":2,"actual_status":"running","label":"rayvast:a:b:c-2","public_ipaddr":"203.0.113.2","host_id":3,"machine_id":4},
		{"id":3,"actual_status":"running","label":"rayvast:a:","public_ipaddr":"203.0.113.3","host_id":3,"machine_id":4}]}`)
	p, err := New(Config{Client: c, Cluster: "a"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].InstanceID != "1" || rs[0].CandidateID != "c-1" {
		t.Errorf("cluster a lists %+v, want only instance 1 (candidate c-1)", rs)
	}
}

// TestHostileInstanceFields: what vast says of an instance is checked
// before use: an ID that is no positive number is skipped, a public IP that
// is not an IP literal leaves the rental not running (no IP recorded).
func TestHostileInstanceFields(t *testing.T) {
	c := listing(t, `{"instances":[
		{"id":-5,"actual_status":"running","label":"rayvast:a:c-1","public_ipaddr":"203.0.113.1","host_id":3,"machine_id":4},
		{"id":0,"actual_status":"running","label":"rayvast:a:c-2","public_ipaddr":"203.0.113.1","host_id":3,"machine_id":4},
		{"id":8,"actual_status":"running","label":"rayvast:a:c-3","public_ipaddr":"not-an-ip\n","host_id":3,"machine_id":4},
		{"id":9,"actual_status":"running","label":"rayvast:a:c-4","public_ipaddr":" 2001:db8::1 ","host_id":3,"machine_id":4}]}`)
	p, err := New(Config{Client: c, Cluster: "a"})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rs {
		got[r.InstanceID] = r.PublicIP
		if r.InstanceID == "8" && r.Running {
			t.Errorf("instance 8 with a bad IP is running")
		}
	}
	want := map[string]string{"8": "", "9": "2001:db8::1"}
	if len(got) != len(want) || got["8"] != want["8"] || got["9"] != want["9"] {
		t.Errorf("rentals (instance → ip) = %v, want %v", got, want)
	}
	r, err := p.Get(context.Background(), "7")
	if err != nil {
		t.Fatal(err)
	}
	if r.PublicIP != "" || r.Running {
		t.Errorf("get 7 = %+v, want no IP and not running", r)
	}
}

// TestErrorEchoingKeyIsScrubbed: an error answer that quotes the key (an
// API saying which key it refused) reaches neither the error nor the log.
func TestErrorEchoingKeyIsScrubbed(t *testing.T) {
	for _, st := range []int{401, 503} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(st)
			io.WriteString(w, `{"success":false,"error":"auth","msg":"bad key `+testKey+`"}`)
		}))
		var logs bytes.Buffer
		c, err := NewClient(ClientConfig{BaseURL: srv.URL, Key: secret.New(testKey), Retries: 1,
			Log: slog.New(slog.NewTextHandler(&logs, nil)), Sleep: func(context.Context, time.Duration) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ListInstances(context.Background())
		srv.Close()
		if err == nil || strings.Contains(err.Error(), testKey) || strings.Contains(logs.String(), testKey) {
			t.Errorf("HTTP %d: err %v, logs %q: want an error without the key", st, err, logs.String())
		}
	}
}
