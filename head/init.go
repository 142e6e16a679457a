package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/rayvast/rayvast/head/statedir"
	"github.com/rayvast/rayvast/internal/pki"
)

func runInit(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("head init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o statedir.Options
	fs.StringVar(&o.Dir, "state", "", "state dir to create (0700); refuses an existing non-empty dir")
	fs.StringVar(&o.IP, "ip", "", "the head's IP literal as candidates reach it (RAYVAST_HEAD)")
	fs.StringVar(&o.DNS, "dns", "", "optional DNS name for the head's certificate")
	fs.StringVar(&o.Cluster, "cluster", "", "optional cluster name (names the CA, labels rentals)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: head init --state DIR --ip IP [--dns NAME] [--cluster NAME]\n\n"+
			"Creates the cluster CA (ECDSA P-256), the head's serving certificate for IP,\n"+
			"the cluster token, the app id and the app root key. Keys are 0600.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.Dir == "" || o.IP == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	if err := statedir.Init(o); err != nil {
		fmt.Fprintf(stderr, "head: %v\n", err)
		return 1
	}
	st, err := statedir.Load(o.Dir)
	if err != nil {
		fmt.Fprintf(stderr, "head: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "state dir:      %s\nhead ip:        %s\nca sha256:      %s\napp id:         %s\n",
		o.Dir, st.HeadIP, pki.Fingerprint(st.CA.Cert.Raw), st.AppID)
	return 0
}
