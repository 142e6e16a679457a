package main

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/rayvast/rayvast/head/rayhead"
	"github.com/rayvast/rayvast/head/statedir"
)

const rayHeadCertUsage = `usage: head ray-head-cert --state DIR --ip IP --out DIR

Writes what the Ray head process needs to join the nodes' TLS and token
setup: ca.crt, ray-head.crt and ray-head.key (issued by the cluster CA for
IP and 127.0.0.1, no instance URI, so port B never takes it for a node) and
cluster_token (0600), into OUT (0700, created if missing; existing files are
not overwritten). Prints the environment for "ray start --head" as
shell export lines.

`

// runRayHeadCert is `head ray-head-cert`.
func runRayHeadCert(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("head ray-head-cert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state dir made by head init")
	ipFlag := fs.String("ip", "", "the Ray head's IP as nodes reach it")
	out := fs.String("out", "", "directory to write the files into")
	fs.Usage = func() { fmt.Fprint(fs.Output(), rayHeadCertUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ip, err := netip.ParseAddr(*ipFlag)
	if *state == "" || *out == "" || err != nil || fs.NArg() > 0 {
		if *ipFlag != "" && err != nil {
			fmt.Fprintf(stderr, "head ray-head-cert: --ip %q is not an IP literal\n", *ipFlag)
		}
		fs.Usage()
		return 2
	}
	st, err := statedir.Load(*state)
	if err != nil {
		fmt.Fprintf(stderr, "head ray-head-cert: %v\n", err)
		return 1
	}
	files, err := writeRayHeadFiles(st, ip, *out, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "head ray-head-cert: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "export RAY_USE_TLS=1\nexport RAY_TLS_SERVER_CERT=%s\nexport RAY_TLS_SERVER_KEY=%s\nexport RAY_TLS_CA_CERT=%s\nexport RAY_AUTH_MODE=token\nexport RAY_AUTH_TOKEN_PATH=%s\n",
		files.cert, files.key, files.ca, files.token)
	return 0
}

type rayHeadFiles struct{ ca, cert, key, token string }

func (f rayHeadFiles) rayhead() rayhead.Files {
	return rayhead.Files{CA: f.ca, Cert: f.cert, Key: f.key, Token: f.token}
}

func writeRayHeadFiles(st *statedir.State, ip netip.Addr, out string, now time.Time) (rayHeadFiles, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return rayHeadFiles{}, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return rayHeadFiles{}, fmt.Errorf("make %s: %w", abs, err)
	}
	if err := os.Chmod(abs, 0o700); err != nil {
		return rayHeadFiles{}, err
	}
	issued, err := st.CA.IssueRayHead(rand.Reader, ip, now)
	if err != nil {
		return rayHeadFiles{}, err
	}
	f := rayHeadFiles{ca: filepath.Join(abs, "ca.crt"), cert: filepath.Join(abs, "ray-head.crt"),
		key: filepath.Join(abs, "ray-head.key"), token: filepath.Join(abs, "cluster_token")}
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{f.ca, st.CA.CertPEM, 0o644},
		{f.cert, issued.CertPEM, 0o644},
		{f.key, issued.KeyPEM.Reveal(), 0o600},
		{f.token, []byte(st.ClusterToken.Reveal()), 0o600},
	} {
		// O_EXCL: never overwrite, never follow a planted symlink.
		fh, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, w.mode)
		if err != nil {
			return rayHeadFiles{}, fmt.Errorf("write %s: %w", filepath.Base(w.path), err)
		}
		_, werr := fh.Write(w.data)
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return rayHeadFiles{}, fmt.Errorf("write %s: %w", filepath.Base(w.path), werr)
		}
	}
	return f, nil
}
