package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLock(t *testing.T) {
	dir := t.TempDir()
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v, want ErrLocked naming pid %d", err, os.Getpid())
	}
	l.Unlock()
	l2, err := Lock(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock()
}

func TestCleanTemp(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{".head.json.tmp123", ".state.json.tmp9", "state.db", "head.json"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o600)
	}
	removed, err := CleanTemp(dir)
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v %v, want the two temp files", removed, err)
	}
	for _, n := range []string{"state.db", "head.json"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s removed", n)
		}
	}
}

func TestRecordStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := Init(Options{Dir: dir, IP: "127.0.0.1", Cluster: "c1"}); err != nil {
		t.Fatal(err)
	}
	if err := RecordStore(dir, "abc"); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil || s.StoreID != "abc" || s.Cluster != "c1" {
		t.Fatalf("after RecordStore: %+v %v", s, err)
	}
}

// TestInitLeavesNothingHalfMade: a failing init leaves no dir, a killed
// one's temp dir is removed by the next init, and a half-made dir written in
// place is named by Load.
func TestInitLeavesNothingHalfMade(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "state")
	stale := filepath.Join(parent, ".state.init-999999999")
	os.Mkdir(stale, 0o700)
	os.WriteFile(filepath.Join(stale, CAKey), []byte("x"), 0o600)
	if err := Init(Options{Dir: dir, IP: "127.0.0.1", Rand: strings.NewReader("short")}); err == nil {
		t.Fatal("init with a failing random source succeeded")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed init left %s: %v", dir, err)
	}
	if err := Init(Options{Dir: dir, IP: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a killed init's temp dir is still there")
	}
	os.Remove(filepath.Join(dir, HeadInfo))
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "half-made") {
		t.Errorf("Load of a dir without head.json: %v, want half-made", err)
	}
}
