package statedir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInitLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := Init(Options{Dir: dir, IP: "127.0.0.1", DNS: "head.test", Cluster: "c1"}); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", fi.Mode().Perm())
	}
	for _, f := range []string{CAKey, HeadKey, Secrets} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v %v, want 0600", f, fi.Mode().Perm(), err)
		}
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.HeadIP != "127.0.0.1" || s.Cluster != "c1" || len(s.AppID) != 40 || s.AppRootKey.Len() != 32 || len(s.ClusterToken.Reveal()) != 43 {
		t.Errorf("loaded %+v", s)
	}
	if err := Init(Options{Dir: dir, IP: "127.0.0.1"}); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("second init: %v, want a refusal", err)
	}
	os.Chmod(filepath.Join(dir, CAKey), 0o644)
	if _, err := Load(dir); err == nil {
		t.Error("Load accepted a world-readable CA key")
	}
}

func TestInitBadIP(t *testing.T) {
	if err := Init(Options{Dir: t.TempDir() + "/s", IP: "head.example"}); err == nil {
		t.Error("init accepted a DNS name as --ip")
	}
}
