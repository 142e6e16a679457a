package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
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
	files, err := rayhead.WriteFiles(st, ip, *out, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "head ray-head-cert: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "export RAY_USE_TLS=1\nexport RAY_TLS_SERVER_CERT=%s\nexport RAY_TLS_SERVER_KEY=%s\nexport RAY_TLS_CA_CERT=%s\nexport RAY_AUTH_MODE=token\nexport RAY_AUTH_TOKEN_PATH=%s\n",
		files.Cert, files.Key, files.CA, files.Token)
	return 0
}
