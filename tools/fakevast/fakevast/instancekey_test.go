package fakevast

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rayvast/rayvast/internal/rvtest"
)

// TestInstanceKeyEndsOnlyItsOwn: the create answer's instance_api_key is
// the container's CONTAINER_API_KEY; it may show and destroy its own
// instance (hello-world.mdx, docker-environment.mdx) and nothing else: not
// another instance (refused 404 auth_error, the other one kept), not the
// account's list, not a create. Its destroy is recorded as by its own key.
func TestInstanceKeyEndsOnlyItsOwn(t *testing.T) {
	clk := rvtest.NewClock(time.Unix(1_800_000_000, 0))
	be := &memBackend{launches: map[int64]Launch{}, stopped: map[int64]bool{}}
	s := New(Config{Key: "k", Backend: be, Now: clk.Now, Offers: DefaultOffers(2), NoLimits: true})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	acct := api{t, srv.URL, "k"}
	var ids []int64
	var keys []string
	for _, offer := range []string{"5001", "5002"} {
		st, m := acct.call("PUT", "/api/v0/asks/"+offer+"/", `{"image":"img","label":"rayvast:c:x","runtype":"args","env":{}}`)
		key, _ := m["instance_api_key"].(string)
		if st != 200 || m["success"] != true || key == "" {
			t.Fatalf("create: %d %v", st, m)
		}
		ids = append(ids, int64(m["new_contract"].(float64)))
		keys = append(keys, key)
	}
	s.Wait()
	if be.launches[ids[0]].APIKey != keys[0] {
		t.Fatal("the container's CONTAINER_API_KEY is not the create answer's instance_api_key")
	}
	a := api{t, srv.URL, keys[0]}
	path := func(id int64) string { return "/api/v0/instances/" + strconv.FormatInt(id, 10) + "/" }
	if st, m := a.call("DELETE", path(ids[1]), ""); st != 404 || m["error"] != "auth_error" {
		t.Errorf("instance 0's key destroying instance 1: %d %v, want 404 auth_error", st, m)
	}
	if st, _ := a.call("GET", "/api/v0/instances/", ""); st != 404 {
		t.Errorf("instance 0's key listing the account: %d, want 404", st)
	}
	if st, _ := a.call("PUT", "/api/v0/asks/5001/", `{"image":"img","runtype":"args","env":{}}`); st != 404 {
		t.Errorf("instance 0's key creating: %d, want 404", st)
	}
	if live := s.Live(); len(live) != 2 {
		t.Fatalf("live after refused calls: %d, want 2", len(live))
	}
	if st, _ := a.call("GET", path(ids[0]), ""); st != 200 {
		t.Errorf("instance 0's key showing itself: %d, want 200", st)
	}
	if st, m := a.call("DELETE", path(ids[0]), ""); st != 200 || m["success"] != true {
		t.Fatalf("instance 0's key destroying itself: %d %v", st, m)
	}
	live := s.Live()
	if len(live) != 1 || live[0].ID != ids[1] {
		t.Errorf("live %v, want only instance 1", live)
	}
	for _, in := range s.AllInstances() {
		if in.ID == ids[0] && !in.DestroyedByOwnKey {
			t.Error("instance 0's destroy not recorded as by its own key")
		}
	}
	if !be.stopped[ids[0]] || be.stopped[ids[1]] {
		t.Errorf("backend stops %v, want only instance 0", be.stopped)
	}
}
