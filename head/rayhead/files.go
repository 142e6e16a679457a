package rayhead

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/head/statedir"
)

// FilesDir is the state dir's folder of the Ray head head up runs: its TLS
// and token files, and its shim.
const FilesDir = "ray-head"

// FilesIn names the four files in dir (STATE/ray-head for head up's).
func FilesIn(dir string) Files {
	return Files{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "ray-head.crt"),
		Key: filepath.Join(dir, "ray-head.key"), Token: filepath.Join(dir, "cluster_token")}
}

func (f Files) all() []string { return []string{f.CA, f.Cert, f.Key, f.Token} }

// WriteFiles writes what a Ray head needs to join the nodes' TLS and token
// setup into out (0700, made if missing): the cluster CA, a certificate for
// ip issued by it (no instance URI: port B never takes it for a node), its
// key and the cluster token (0600). It never overwrites a file (head
// ray-head-cert, and head up once).
func WriteFiles(st *statedir.State, ip netip.Addr, out string, now time.Time) (Files, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return Files{}, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return Files{}, fmt.Errorf("make %s: %w", abs, err)
	}
	if err := os.Chmod(abs, 0o700); err != nil {
		return Files{}, err
	}
	issued, err := st.CA.IssueRayHead(rand.Reader, ip, now)
	if err != nil {
		return Files{}, err
	}
	f := FilesIn(abs)
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{f.CA, st.CA.CertPEM, 0o644},
		{f.Cert, issued.CertPEM, 0o644},
		{f.Key, issued.KeyPEM.Reveal(), 0o600},
		{f.Token, []byte(st.ClusterToken.Reveal()), 0o600},
	} {
		// O_EXCL: never overwrite, never follow a planted symlink.
		fh, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, w.mode)
		if err != nil {
			return Files{}, fmt.Errorf("write %s: %w", filepath.Base(w.path), err)
		}
		_, werr := fh.Write(w.data)
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return Files{}, fmt.Errorf("write %s: %w", filepath.Base(w.path), werr)
		}
	}
	return f, nil
}

// FilesOnce is WriteFiles into STATE/ray-head for the state's head IP,
// reusing the files of an earlier run unless the certificate ends within
// RenewBefore.
func FilesOnce(st *statedir.State, now time.Time) (Files, error) {
	dir := st.Path(FilesDir)
	f := FilesIn(dir)
	have := 0
	for _, p := range f.all() {
		if _, err := os.Stat(p); err == nil {
			have++
		}
	}
	if have == 4 {
		if !CertEndsBefore(f.Cert, now.Add(RenewBefore)) {
			return f, nil
		}
		for _, p := range f.all() {
			if err := os.Remove(p); err != nil {
				return f, fmt.Errorf("renew ray head files: %w", err)
			}
		}
		have = 0
	}
	if have > 0 {
		return f, fmt.Errorf("ray head files: %s is incomplete; remove it to have it made again", dir)
	}
	ip, err := netip.ParseAddr(st.HeadIP)
	if err != nil {
		return f, fmt.Errorf("state head IP %q: %w", st.HeadIP, err)
	}
	return WriteFiles(st, ip, dir, now)
}

// RenewBefore is how long before its end the Ray head's certificate is
// issued again at a head up (it lasts pki.NodeLifetime).
const RenewBefore = 30 * 24 * time.Hour

// CertEndsBefore reports whether the PEM certificate at path ends before t
// (an unreadable one does: it is made again).
func CertEndsBefore(path string, t time.Time) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return true
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return true
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	return err != nil || c.NotAfter.Before(t)
}
