package rayhead

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/pki"
)

// TestFilesRenewed: an earlier run's files are reused until the
// certificate nears its end, then made again.
func TestFilesRenewed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	if err := statedir.Init(statedir.Options{Dir: dir, IP: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	st, err := statedir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	old := now.Add(-pki.NodeLifetime + 10*24*time.Hour) // ends in 10 days
	f, err := FilesOnce(st, old)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(f.Cert)
	again, err := FilesOnce(st, old)
	if b, _ := os.ReadFile(again.Cert); err != nil || !bytes.Equal(b, first) {
		t.Errorf("a fresh certificate was not reused (%v)", err)
	}
	renewed, err := FilesOnce(st, now)
	if b, _ := os.ReadFile(renewed.Cert); err != nil || bytes.Equal(b, first) || CertEndsBefore(renewed.Cert, now.Add(RenewBefore)) {
		t.Errorf("a certificate ending in 10 days was not renewed (%v)", err)
	}
}
