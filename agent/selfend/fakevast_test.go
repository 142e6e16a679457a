package selfend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayvast/rayvast/agent/backoff"
	"github.com/rayvast/rayvast/internal/secret"
	"github.com/rayvast/rayvast/tools/fakevast/fakevast"
)

// rentOn creates one instance on fake (the account's key) and returns its id.
func rentOn(t *testing.T, url string, offer int) int64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url+"/api/v0/asks/"+strconv.Itoa(offer)+"/", strings.NewReader(`{"client_id":"me","image":"img:1","disk":16}`))
	req.Header.Set("Authorization", "Bearer acct")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans struct {
		NewContract int64 `json:"new_contract"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || ans.NewContract == 0 {
		t.Fatalf("create: %v %+v", err, ans)
	}
	return ans.NewContract
}

// TestVastEndAgainstFakevast: the node's destroy with its own key, against
// fakevast: an instance already destroyed (404 not_found) is done at once,
// not retried for ten minutes; a key vast refuses (401, 403, or a wrong
// key's 404 auth_error) is not
// retried either, and the node's last log lines say the rental keeps
// billing and the head ends it when back (never the key); an accepted key
// destroys exactly its instance.
func TestVastEndAgainstFakevast(t *testing.T) {
	fake := fakevast.New(fakevast.Config{Key: "acct", NoLimits: true})
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	runKey := func(id int64, key string) (string, int, error) {
		var logs bytes.Buffer
		slept := 0
		c := &clock{time.Unix(1e9, 0)}
		retry := backoff.RetryConfig{Now: c.now, Sleep: func(_ context.Context, d time.Duration) error { slept++; c.t = c.t.Add(d); return nil },
			MaxElapsed: 10 * time.Minute}
		v := Vast{BaseURL: srv.URL, InstanceID: strconv.FormatInt(id, 10), Key: secret.New(key)}
		err := Run(context.Background(), v, WhyUnheard, time.Minute, retry, slog.New(slog.NewTextHandler(&logs, nil)))
		return logs.String(), slept, err
	}
	run := func(id int64) (string, int, error) { return runKey(id, fake.InstanceKey(id)) }

	gone := rentOn(t, srv.URL, 5001)
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/api/v0/instances/"+strconv.FormatInt(gone, 10)+"/", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer acct")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the head's destroy: %v %v", resp, err)
	}
	if logs, slept, err := run(gone); err != nil || slept != 0 || !strings.Contains(logs, "already destroyed") {
		t.Errorf("already destroyed: %v after %d retries; want done at once, logged:\n%s", err, slept, logs)
	}

	for i, status := range []int{401, 403} {
		id := rentOn(t, srv.URL, 5002+i)
		key := fake.InstanceKey(id)
		fake.RefuseInstanceKey(id, status)
		logs, slept, err := run(id)
		if !errors.Is(err, ErrKeyRefused) || slept != 0 {
			t.Errorf("key refused %d: %v after %d retries; want ErrKeyRefused at once", status, err, slept)
		}
		if !strings.Contains(logs, "refused this instance's CONTAINER_API_KEY") || !strings.Contains(logs, "the head ends it when it is back") || strings.Contains(logs, key) {
			t.Errorf("key refused %d: the log does not say so (or holds the key):\n%s", status, logs)
		}
	}

	// A key that is not the instance's: vast answers 404 auth_error.
	wrong := rentOn(t, srv.URL, 5005)
	if logs, slept, err := runKey(wrong, "not-"+fake.InstanceKey(wrong)); !errors.Is(err, ErrKeyRefused) || slept != 0 ||
		!strings.Contains(logs, "the head ends it when it is back") {
		t.Errorf("wrong key (404 auth_error): %v after %d retries; want ErrKeyRefused at once, logged:\n%s", err, slept, logs)
	}

	ok := rentOn(t, srv.URL, 5004)
	if _, _, err := run(ok); err != nil {
		t.Fatalf("own destroy: %v", err)
	}
	for _, in := range fake.AllInstances() {
		if in.ID == ok && (!in.Destroyed || !in.DestroyedByOwnKey) {
			t.Errorf("instance %d: destroyed %v by own key %v, want both", ok, in.Destroyed, in.DestroyedByOwnKey)
		}
	}
}
