package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/rayvast/rayvast/internal/pki"
	"github.com/rayvast/rayvast/internal/wire"
)

// runBare is the reference: a bare Go process doing the head's unavoidable
// work per request and nothing else, on the cluster's own CA and serving
// certificate. On --listen, a heartbeat: mutual TLS verified by crypto/tls
// with the cluster CA, decode the body, answer the same JSON. On
// --listen-enroll, an enrollment (bareenroll.go). The head's ports A and B
// are measured against it in the same run on the same CPUs.
func runBare(args []string) int {
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	ca := fs.String("ca", "", "CA PEM")
	caKey := fs.String("ca-key", "", "CA key PEM, to issue node certificates")
	cert := fs.String("cert", "", "server cert PEM")
	key := fs.String("key", "", "server key PEM")
	listen := fs.String("listen", "", "address for heartbeats (mutual TLS, like port B)")
	listenEnroll := fs.String("listen-enroll", "", "address for enrollments (TLS, like port A)")
	checks := fs.Int("checks", 16, "port checks at once")
	if fs.Parse(args) != nil {
		return 2
	}
	raiseNoFile()
	caPEM, err := os.ReadFile(*ca)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	caKeyPEM, err := os.ReadFile(*caKey)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	issuer, err := pki.LoadCA(caPEM, caKeyPEM)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	kp, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hb := http.NewServeMux()
	hb.HandleFunc("POST /heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var hb wire.Heartbeat
		if err := wire.Decode(r.Body, wire.MaxBody, &hb); err != nil || hb.InstanceID == "" {
			http.Error(w, `{"error":"bad_request"}`, 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"interval_s":30,"action":"none"}` + "\n"))
	})
	enr := http.NewServeMux()
	enr.Handle("POST /enroll", newBareEnroll(issuer, *checks))
	errs := make(chan error, 2)
	go func() {
		errs <- bareServe(*listenEnroll, enr, &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12})
	}()
	go func() {
		errs <- bareServe(*listen, hb, &tls.Config{Certificates: []tls.Certificate{kp}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	}()
	fmt.Fprintln(os.Stderr, <-errs)
	return 1
}

func bareServe(addr string, h http.Handler, tc *tls.Config) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 90 * time.Second,
		// The coordinator's readiness probe connects and hangs up: not news.
		ErrorLog: log.New(io.Discard, "", 0), TLSConfig: tc}
	return srv.ListenAndServeTLS("", "")
}
